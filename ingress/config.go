package ingress

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/workitem"
)

// Defaults (docs/daemon.md §2, §4.2, §12.2, and docs/decisions.md §10).
const (
	DefaultPath = "/gh-webhook"
	// DefaultMaxBodyBytes is GitHub's own cap on a webhook payload.
	DefaultMaxBodyBytes = 25 << 20
	// DefaultMaxUnverifiedBytes bounds the body bytes held, across all
	// requests, before their signatures are checked: room for one
	// GitHub-sized payload and a few hundred ordinary ones.
	DefaultMaxUnverifiedBytes = 32 << 20
	// DefaultDedupSize bounds the delivery-id cache (the reference's 1024 is
	// too small for a burst of redeliveries at our throughput).
	DefaultDedupSize = 1 << 16
	// DefaultDedupWindow is how long a kept delivery id is remembered.
	DefaultDedupWindow = 24 * time.Hour
	// DefaultSinkTimeout bounds one hand-off to the Sink; past it the
	// request is answered 503.
	DefaultSinkTimeout = 5 * time.Second
	// DefaultRetryAfter is the Retry-After sent with a 503.
	DefaultRetryAfter = 30 * time.Second
	// DefaultAutoExecuteLabel is routing.autoExecuteLabel's default.
	DefaultAutoExecuteLabel = "the-loop: auto-execute"
	// maxDeliveryID bounds X-GitHub-Delivery (GitHub sends a UUID); the id
	// becomes the queue's dedup key.
	maxDeliveryID = 128
)

// ErrInvalidConfig marks a configuration the receiver refuses to start with.
var ErrInvalidConfig = errors.New("ingress: invalid configuration")

// Config is everything the router and the receiver need. Build it with
// DefaultConfig and override fields; Validate (called by NewRouter and
// NewReceiver) refuses what cannot run and returns warnings for what runs
// but is probably wrong.
type Config struct {
	// Path is the POST path (webhooks.ghWebhook.path).
	Path string
	// Secret is the HMAC secret (from THE_LOOP_GH_WEBHOOK_SECRET or the
	// variable webhooks.ghWebhook.secretEnv names). Never read from a file.
	Secret []byte
	// InsecureAcceptUnsigned lets the receiver run without a secret and
	// accept unsigned POSTs. Only `loopd run --insecure-accept-unsigned`
	// sets it; without it an empty Secret refuses to start.
	InsecureAcceptUnsigned bool
	// Events is the event filter (webhooks.ghWebhook.events); empty means
	// DefaultEvents.
	Events []string
	// Repositories is the repository bound: "owner/repo", "owner/*", or
	// "host/owner/repo" for a GitHub Enterprise host. Matching is
	// case-insensitive (GitHub names are). Empty: every repository is
	// dropped (fail closed), with a warning from Validate.
	Repositories []string
	// AuthorizedUsers is routing.authorizedUsers: exact, case-sensitive
	// logins. Empty denies every named actor.
	AuthorizedUsers []string
	// Authorized is routing.authorized: logins, team:ORG/SLUG,
	// permission:write|maintain|admin, codeowners (authority.go). With a
	// rule beyond logins the Router admits every named actor and the
	// daemon asks an Authority before anything happens.
	Authorized []string
	// SelfLogins are the logins loopd itself posts as (a GitHub App's
	// "<slug>[bot]"): their events are dropped as self-authored.
	SelfLogins []string
	// AutoExecuteLabel is routing.autoExecuteLabel.
	AutoExecuteLabel string
	// Control configures the control keywords.
	Control ControlConfig
	// MaxBodyBytes caps a request body (413 beyond it).
	MaxBodyBytes int64
	// MaxUnverifiedBytes caps the body bytes held across all requests
	// before their signatures are checked (503 + Retry-After beyond it). It
	// must be at least MaxBodyBytes, or the largest delivery never fits.
	MaxUnverifiedBytes int64
	// DedupSize and DedupWindow bound the delivery-id cache.
	DedupSize   int
	DedupWindow time.Duration
	// SinkTimeout bounds one Sink.Put.
	SinkTimeout time.Duration
	// RetryAfter is sent with a 503.
	RetryAfter time.Duration
}

// DefaultConfig returns the defaults. Secret, Repositories and
// AuthorizedUsers are empty: the operator must name them.
func DefaultConfig() Config {
	return Config{
		Path:               DefaultPath,
		Events:             DefaultEvents(),
		AutoExecuteLabel:   DefaultAutoExecuteLabel,
		Control:            DefaultControlConfig(),
		MaxBodyBytes:       DefaultMaxBodyBytes,
		MaxUnverifiedBytes: DefaultMaxUnverifiedBytes,
		DedupSize:          DefaultDedupSize,
		DedupWindow:        DefaultDedupWindow,
		SinkTimeout:        DefaultSinkTimeout,
		RetryAfter:         DefaultRetryAfter,
	}
}

// withDefaults fills zero fields with defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Path == "" {
		c.Path = d.Path
	}
	if len(c.Events) == 0 {
		c.Events = d.Events
	}
	if c.AutoExecuteLabel == "" {
		c.AutoExecuteLabel = d.AutoExecuteLabel
	}
	if c.Control.Keywords == nil {
		c.Control.Keywords = d.Control.Keywords
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = d.MaxBodyBytes
	}
	if c.MaxUnverifiedBytes <= 0 {
		c.MaxUnverifiedBytes = max(d.MaxUnverifiedBytes, c.MaxBodyBytes+bodyChunk)
	}
	if c.DedupSize <= 0 {
		c.DedupSize = d.DedupSize
	}
	if c.DedupWindow <= 0 {
		c.DedupWindow = d.DedupWindow
	}
	if c.SinkTimeout <= 0 {
		c.SinkTimeout = d.SinkTimeout
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = d.RetryAfter
	}
	return c
}

// Validate checks c (zero fields count as their defaults). It returns an
// error wrapping ErrInvalidConfig for a configuration that must not run —
// no secret without the insecure flag, a path that is not absolute, a
// malformed repository entry or keyword — and warnings for one that runs
// but will not do what the operator likely wants.
func (c Config) Validate() (warnings []string, err error) {
	c = c.withDefaults()
	var problems []string
	if len(c.Secret) == 0 && !c.InsecureAcceptUnsigned {
		problems = append(problems, "no webhook secret: set THE_LOOP_GH_WEBHOOK_SECRET (or the variable webhooks.ghWebhook.secretEnv names) to the secret configured on the GitHub hook; --insecure-accept-unsigned runs without one and lets anyone who reaches the port forge events")
	}
	if err := CheckSecret(c.Secret); err != nil {
		problems = append(problems, err.Error())
	}
	if len(c.Secret) == 0 && c.InsecureAcceptUnsigned {
		warnings = append(warnings, "INSECURE: the webhook receiver accepts unsigned requests (--insecure-accept-unsigned); anyone who reaches the port can forge an authorized user's comment")
	}
	if !strings.HasPrefix(c.Path, "/") || strings.ContainsAny(c.Path, "?# ") {
		problems = append(problems, fmt.Sprintf("webhooks.ghWebhook.path %q must be an absolute path without query, e.g. /gh-webhook", c.Path))
	}
	if c.MaxUnverifiedBytes < c.MaxBodyBytes+bodyChunk {
		problems = append(problems, fmt.Sprintf("the unverified-body budget (%d bytes) is smaller than the largest body plus one read chunk (%d+%d): the largest delivery could never be read", c.MaxUnverifiedBytes, c.MaxBodyBytes, bodyChunk))
	}
	if closers := closingKinds(); slices.ContainsFunc(closers, func(k string) bool { return !slices.Contains(c.Events, k) }) {
		warnings = append(warnings, "webhooks.ghWebhook.events lacks "+strings.Join(closers, " or ")+": closures will never be seen and sessions will leak")
	}
	for _, r := range c.Repositories {
		if _, err := parseRepoPattern(r); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(c.Repositories) == 0 {
		warnings = append(warnings, "no repositories configured (repositories: in the CLI config): every event is dropped until the repositories theloop works on are listed")
	}
	if err := ParseAuthorized(c.Authorized); err != nil {
		return warnings, err
	}
	if len(c.AuthorizedUsers) == 0 && len(c.Authorized) == 0 {
		warnings = append(warnings, "routing.authorizedUsers is empty: every named actor is denied, so no comment, approval or control command is ever forwarded")
	}
	if _, err := newKeywordTable(c.Control); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return warnings, fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(problems, "; "))
	}
	return warnings, nil
}

// CheckSecret refuses a webhook secret GitHub could not have signed with
// as given: one that is only whitespace, or starts or ends with it (a
// stray newline from `echo` or a secrets file). Every delivery would be
// answered 401 and nothing would say why. An empty secret is not checked
// here (it means "none").
func CheckSecret(secret []byte) error {
	if len(secret) == 0 {
		return nil
	}
	s := string(secret)
	switch t := strings.TrimSpace(s); {
	case t == "":
		return errors.New("the webhook secret (THE_LOOP_GH_WEBHOOK_SECRET, or the variable webhooks.ghWebhook.secretEnv names) is blank: set it to the secret configured on the GitHub webhook")
	case t != s:
		return errors.New("the webhook secret (THE_LOOP_GH_WEBHOOK_SECRET, or the variable webhooks.ghWebhook.secretEnv names) starts or ends with whitespace, which GitHub's secret cannot: every delivery would be answered 401. Export it without the trailing newline, e.g. export THE_LOOP_GH_WEBHOOK_SECRET=\"$(tr -d '\\n' < secret-file)\"")
	}
	return nil
}

// repoPattern is one parsed entry of Config.Repositories.
type repoPattern struct {
	host  string // lower-case; "" = github.com
	owner string // lower-case
	repo  string // lower-case; "*" = any
}

func parseRepoPattern(s string) (repoPattern, error) {
	parts := strings.Split(strings.ToLower(strings.TrimSpace(s)), "/")
	var p repoPattern
	switch len(parts) {
	case 2:
		p.owner, p.repo = parts[0], parts[1]
	case 3:
		p.host, p.owner, p.repo = parts[0], parts[1], parts[2]
		if p.host == workitem.DefaultGitHubHost {
			p.host = ""
		}
	default:
		return p, fmt.Errorf("repositories: %q must be owner/repo, owner/* or host/owner/repo", s)
	}
	if !workitem.ValidName(p.owner) || (p.repo != "*" && !workitem.ValidName(p.repo)) || (p.host != "" && strings.ContainsAny(p.host, " \t")) {
		return p, fmt.Errorf("repositories: %q: owner and repository must match [A-Za-z0-9._-]+ and not start with \"-\" (or * for every repository of the owner)", s)
	}
	return p, nil
}

// repoBound is the compiled repository allow-list.
type repoBound []repoPattern

func newRepoBound(entries []string) repoBound {
	var b repoBound
	for _, e := range entries {
		if p, err := parseRepoPattern(e); err == nil {
			b = append(b, p)
		}
	}
	return b
}

// allows reports whether owner/repo on host ("" = github.com) is bound.
func (b repoBound) allows(host, owner, repo string) bool {
	for _, p := range b {
		if p.host != host && !strings.EqualFold(p.host, host) {
			continue
		}
		if !strings.EqualFold(p.owner, owner) {
			continue
		}
		if p.repo == "*" || strings.EqualFold(p.repo, repo) {
			return true
		}
	}
	return false
}
