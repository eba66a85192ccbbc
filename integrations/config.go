package integrations

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/workitem"
)

// Transport names.
const (
	TransportAuto    = "auto"
	TransportAPI     = "api"
	TransportCLI     = "cli"
	TransportWebhook = "webhook"
)

// Default environment-variable names. They name where a secret lives; the
// secret itself never appears in configuration.
const (
	DefaultSlackBotTokenEnv   = "THE_LOOP_SLACK_BOT_TOKEN"
	DefaultSlackWebhookURLEnv = "THE_LOOP_SLACK_WEBHOOK_URL"
	DefaultJiraEmailEnv       = "THE_LOOP_JIRA_EMAIL"
	DefaultJiraTokenEnv       = "THE_LOOP_JIRA_TOKEN"
)

// DefaultGitHubTokenEnv lists the variables the GitHub api transport reads,
// first non-empty wins.
var DefaultGitHubTokenEnv = []string{"GH_TOKEN", "GITHUB_TOKEN"}

// Defaults for the call policy. The timeout is kept well under
// graph.DefaultHookTimeout (30 s): a hook whose integration call times out
// can still record the failure and pass, whereas a hook that overruns its
// own deadline becomes a block.
const (
	DefaultTimeoutSeconds = 10
	DefaultMaxAttempts    = 3
	DefaultGitHubBaseURL  = "https://api.github.com"
	DefaultSlackBaseURL   = "https://slack.com/api"
)

// Config is the `integrations:` block of the CLI config (cli-config.yaml).
// Transport and credentials are declared here once (R6a); per-repo configs
// only name a provider. A nil provider block means: GitHub with defaults
// (transport auto), Slack and Jira not configured.
type Config struct {
	GitHub *GitHubConfig `yaml:"github,omitempty" json:"github,omitempty"`
	Slack  *SlackConfig  `yaml:"slack,omitempty" json:"slack,omitempty"`
	Jira   *JiraConfig   `yaml:"jira,omitempty" json:"jira,omitempty"`
}

// GitHubConfig configures the github provider.
type GitHubConfig struct {
	// Transport is auto (default), api or cli.
	Transport string `yaml:"transport,omitempty" json:"transport,omitempty"`
	// TimeoutSeconds bounds one operation, retries and waits included.
	TimeoutSeconds float64 `yaml:"timeoutSeconds,omitempty" json:"timeoutSeconds,omitempty"`
	// MaxAttempts bounds the requests made for one HTTP exchange.
	MaxAttempts int             `yaml:"maxAttempts,omitempty" json:"maxAttempts,omitempty"`
	API         GitHubAPIConfig `yaml:"api,omitempty" json:"api,omitempty"`
	CLI         GitHubCLIConfig `yaml:"cli,omitempty" json:"cli,omitempty"`
	// App, when set, authenticates the api transport as a GitHub App
	// (github_app.go) instead of with a token.
	App *GitHubAppConfig `yaml:"app,omitempty" json:"app,omitempty"`
	// Webhook names the GitHub webhook that delivers to loopd.
	Webhook GitHubWebhookConfig `yaml:"webhook,omitempty" json:"webhook,omitempty"`
}

// GitHubWebhookConfig names loopd's GitHub webhook (read by the daemon's
// reconcile pass, which has its failed deliveries redelivered).
type GitHubWebhookConfig struct {
	// HookID is the webhook's id (the number in its settings URL); 0: the
	// served repositories' hooks whose URL path is the receiver's.
	HookID int64 `yaml:"hookId,omitempty" json:"hookId,omitempty"`
}

// SelfLogins are the logins loopd posts as, beside the marker that
// identifies its comments: the App's bot when it runs as an App.
func (c Config) SelfLogins() []string {
	if c.GitHub != nil && c.GitHub.App != nil && c.GitHub.App.Slug != "" {
		return []string{c.GitHub.App.BotLogin()}
	}
	return nil
}

// GitHubAPIConfig configures the REST transport.
type GitHubAPIConfig struct {
	// BaseURL is the REST root: https://api.github.com, or
	// https://<host>/api/v3 for GitHub Enterprise Server.
	BaseURL string `yaml:"baseUrl,omitempty" json:"baseUrl,omitempty"`
	// TokenEnv lists environment variables holding the token, first
	// non-empty wins. Default GH_TOKEN, GITHUB_TOKEN.
	TokenEnv []string `yaml:"tokenEnv,omitempty" json:"tokenEnv,omitempty"`
	// TokenCommand is an optional secret-store command (argv, no shell)
	// whose standard output is the token, used when no TokenEnv variable is
	// set — e.g. ["pass", "show", "github/theloop"]. Run once, kept in memory.
	TokenCommand []string `yaml:"tokenCommand,omitempty" json:"tokenCommand,omitempty"`
}

// GitHubCLIConfig configures the gh transport.
type GitHubCLIConfig struct {
	// Binary is the gh executable (default: gh, located like go-gh does,
	// honouring GH_PATH).
	Binary string `yaml:"binary,omitempty" json:"binary,omitempty"`
	// Host is passed as `gh api --hostname` for refs that name no host
	// ("" = gh's own default host, GH_HOST included).
	Host string `yaml:"host,omitempty" json:"host,omitempty"`
}

// SlackConfig configures the slack provider.
type SlackConfig struct {
	// Transport is auto (default: api when the bot token is set, else
	// webhook when the webhook URL is set), api or webhook.
	Transport string `yaml:"transport,omitempty" json:"transport,omitempty"`
	// Channel is the default channel for post-message (api transport).
	Channel        string             `yaml:"channel,omitempty" json:"channel,omitempty"`
	TimeoutSeconds float64            `yaml:"timeoutSeconds,omitempty" json:"timeoutSeconds,omitempty"`
	MaxAttempts    int                `yaml:"maxAttempts,omitempty" json:"maxAttempts,omitempty"`
	API            SlackAPIConfig     `yaml:"api,omitempty" json:"api,omitempty"`
	Webhook        SlackWebhookConfig `yaml:"webhook,omitempty" json:"webhook,omitempty"`
}

// SlackAPIConfig configures the Web API transport (chat.postMessage).
type SlackAPIConfig struct {
	// BaseURL defaults to https://slack.com/api.
	BaseURL string `yaml:"baseUrl,omitempty" json:"baseUrl,omitempty"`
	// TokenEnv names the variable holding the bot token (xoxb-...).
	TokenEnv string `yaml:"tokenEnv,omitempty" json:"tokenEnv,omitempty"`
}

// SlackWebhookConfig configures the incoming-webhook transport.
type SlackWebhookConfig struct {
	// URLEnv names the variable holding the webhook URL. The URL is itself
	// a credential, so it is never written in configuration.
	URLEnv string `yaml:"urlEnv,omitempty" json:"urlEnv,omitempty"`
}

// JiraConfig configures the jira provider.
type JiraConfig struct {
	// Transport is api (default; auto means api). There is no cli
	// transport; see the note at the top of jira.go.
	Transport      string        `yaml:"transport,omitempty" json:"transport,omitempty"`
	TimeoutSeconds float64       `yaml:"timeoutSeconds,omitempty" json:"timeoutSeconds,omitempty"`
	MaxAttempts    int           `yaml:"maxAttempts,omitempty" json:"maxAttempts,omitempty"`
	API            JiraAPIConfig `yaml:"api,omitempty" json:"api,omitempty"`
}

// JiraAPIConfig configures the Jira REST transport (API version 2, served by
// Jira Cloud and Data Center alike).
type JiraAPIConfig struct {
	// BaseURL is the site root, e.g. https://example.atlassian.net.
	BaseURL string `yaml:"baseUrl,omitempty" json:"baseUrl,omitempty"`
	// EmailEnv names the variable holding the account email. When it is set
	// (default THE_LOOP_JIRA_EMAIL) the transport uses basic auth
	// email:token (Jira Cloud); set it to "-" to use the token as a bearer
	// personal access token (Jira Data Center).
	EmailEnv string `yaml:"emailEnv,omitempty" json:"emailEnv,omitempty"`
	// TokenEnv names the variable holding the API token.
	TokenEnv string `yaml:"tokenEnv,omitempty" json:"tokenEnv,omitempty"`
}

// DefaultConfig returns the configuration used when the CLI config has no
// integrations block: GitHub with transport auto, nothing else.
func DefaultConfig() Config {
	return Config{GitHub: &GitHubConfig{}}
}

// DecodeConfig turns the raw `integrations:` block of the CLI config (as
// loop.CLIConfig.Integrations holds it; nil for an absent block) into a
// validated Config. Unknown keys are refused — a credential written into
// the block (`token: ghp_…`) is an unknown key, and the error names the key,
// never its value. A nil or empty block yields DefaultConfig.
func DecodeConfig(raw map[string]any) (Config, error) {
	if len(raw) == 0 {
		return DefaultConfig(), nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return Config{}, fmt.Errorf("integrations: the block is not plain data (%v): %w", jsonProblem(err), ErrInvalidConfig)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			return Config{}, fmt.Errorf("integrations.%s: expected %s, found %s: %w", te.Field, te.Type, te.Value, ErrInvalidConfig)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return Config{}, fmt.Errorf("integrations: unknown key %s — see the integrations section of the CLI config reference (credentials belong in environment variables, named by tokenEnv/urlEnv): %w",
				strings.TrimPrefix(err.Error(), "json: unknown field "), ErrInvalidConfig)
		}
		return Config{}, fmt.Errorf("integrations: %s: %w", jsonProblem(err), ErrInvalidConfig)
	}
	if cfg.GitHub == nil {
		cfg.GitHub = &GitHubConfig{}
	}
	return cfg, cfg.Validate()
}

// Validate reports every malformed key at once, each named by its path
// under integrations. It does not look at the environment: a missing token
// is not a configuration error but an unavailable provider (see Set.Verify).
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("integrations.%s: %s: %w", key, fmt.Sprintf(format, args...), ErrInvalidConfig))
	}
	policy := func(prefix string, timeout float64, attempts int) {
		if timeout < 0 {
			bad(prefix+".timeoutSeconds", "must not be negative (0 = default %d)", DefaultTimeoutSeconds)
		}
		if attempts < 0 {
			bad(prefix+".maxAttempts", "must not be negative (0 = default %d)", DefaultMaxAttempts)
		}
	}
	if g := c.GitHub; g != nil {
		switch g.Transport {
		case "", TransportAuto, TransportAPI, TransportCLI:
		default:
			bad("github.transport", "%q is not one of auto, api, cli", g.Transport)
		}
		policy("github", g.TimeoutSeconds, g.MaxAttempts)
		if g.Webhook.HookID < 0 {
			bad("github.webhook.hookId", "must be the webhook's id, a positive number (0 or absent: found among the repositories' hooks)")
		}
		if g.API.BaseURL != "" {
			if _, err := serviceURL(g.API.BaseURL); err != nil {
				bad("github.api.baseUrl", "%v", err)
			}
		}
		for _, name := range g.API.TokenEnv {
			if !validEnvName(name) {
				bad("github.api.tokenEnv", "%q is not an environment-variable name", name)
			}
		}
		if g.CLI.Host != "" && !workitem.ValidHost(g.CLI.Host) {
			bad("github.cli.host", "%q is not a host name", g.CLI.Host)
		}
		if g.App != nil {
			g.App.validate(bad)
			if g.Transport == TransportCLI {
				bad("github.app", "a GitHub App authenticates the api transport: set transport: api (or auto), or drop the app block to use your gh login")
			}
		}
	}
	if s := c.Slack; s != nil {
		switch s.Transport {
		case "", TransportAuto, TransportAPI, TransportWebhook:
		default:
			bad("slack.transport", "%q is not one of auto, api, webhook", s.Transport)
		}
		policy("slack", s.TimeoutSeconds, s.MaxAttempts)
		if s.API.BaseURL != "" {
			if _, err := serviceURL(s.API.BaseURL); err != nil {
				bad("slack.api.baseUrl", "%v", err)
			}
		}
		if s.API.TokenEnv != "" && !validEnvName(s.API.TokenEnv) {
			bad("slack.api.tokenEnv", "%q is not an environment-variable name", s.API.TokenEnv)
		}
		if s.Webhook.URLEnv != "" && !validEnvName(s.Webhook.URLEnv) {
			bad("slack.webhook.urlEnv", "%q is not an environment-variable name", s.Webhook.URLEnv)
		}
	}
	if j := c.Jira; j != nil {
		switch j.Transport {
		case "", TransportAuto, TransportAPI:
		case TransportCLI:
			bad("jira.transport", "cli is not supported: theloop reaches Jira only through its REST API — set transport: api")
		default:
			bad("jira.transport", "%q is not api", j.Transport)
		}
		policy("jira", j.TimeoutSeconds, j.MaxAttempts)
		if j.API.BaseURL == "" {
			bad("jira.api.baseUrl", "is required, e.g. https://example.atlassian.net")
		} else if _, err := serviceURL(j.API.BaseURL); err != nil {
			bad("jira.api.baseUrl", "%v", err)
		}
		if j.API.EmailEnv != "" && j.API.EmailEnv != "-" && !validEnvName(j.API.EmailEnv) {
			bad("jira.api.emailEnv", "%q is not an environment-variable name (or \"-\" for bearer auth)", j.API.EmailEnv)
		}
		if j.API.TokenEnv != "" && !validEnvName(j.API.TokenEnv) {
			bad("jira.api.tokenEnv", "%q is not an environment-variable name", j.API.TokenEnv)
		}
	}
	return errors.Join(errs...)
}

func timeoutOf(seconds float64) time.Duration {
	if seconds <= 0 {
		return DefaultTimeoutSeconds * time.Second
	}
	return time.Duration(seconds * float64(time.Second))
}

func attemptsOf(n int) int {
	if n <= 0 {
		return DefaultMaxAttempts
	}
	return n
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// redactURL hides the userinfo, query and fragment of a configured URL for an
// error message: they may hold a password or a token, and errors are
// printed and logged.
func redactURL(raw string) string {
	s := raw
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i] + "…"
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		if at := strings.LastIndex(s, "@"); at >= 0 {
			return "…@" + s[at+1:]
		}
		return s
	}
	host := rest
	if j := strings.IndexByte(rest, '/'); j >= 0 {
		host = rest[:j]
	}
	if at := strings.LastIndex(host, "@"); at >= 0 {
		rest = "…@" + rest[at+1:]
	}
	return scheme + "://" + rest
}

// serviceURL parses a configured service root. Credentials travel to it, so
// it must be https — plain http is accepted only for loopback hosts (a local
// proxy or a test server). A trailing slash is dropped.
func serviceURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil {
		// url's own error quotes the input, which may hold a password.
		return nil, fmt.Errorf("%q is not an absolute URL", redactURL(raw))
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q is not an absolute URL without credentials, query or fragment", redactURL(raw))
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopback(u.Hostname()) {
			return nil, fmt.Errorf("%q must use https (credentials are sent to it); http is allowed only for loopback hosts", raw)
		}
	default:
		return nil, fmt.Errorf("%q must be an https URL", raw)
	}
	return u, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
