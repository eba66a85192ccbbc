package integrations

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	gh "github.com/cli/go-gh/v2"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/run"
)

// Env looks up an environment variable, like os.LookupEnv.
type Env func(key string) (string, bool)

// Deps is the outside world a Set reaches through. Every field is optional;
// the zero value means the real thing (noted per field). Tests inject fakes.
type Deps struct {
	// Env reads credentials and checks their presence. Default os.LookupEnv.
	Env Env
	// Runner runs gh and secret commands. Default run.Exec{}.
	Runner run.Runner
	// HTTPClient makes every HTTP request. Default a plain client without a
	// global timeout (each call carries its own deadline).
	HTTPClient *http.Client
	// Sink receives integration.call_failed events. Default: discarded.
	Sink graph.Sink
	// Clock times events and rate-limit resets. Default graph.SystemClock.
	Clock graph.Clock
	// Sleep waits between retries. Default SleepContext.
	Sleep Sleeper
	// LookPath locates the gh binary. Default: go-gh's gh.Path (honouring
	// GH_PATH) for "gh", exec.LookPath for any other configured name.
	LookPath func(name string) (string, error)
}

func (d Deps) withDefaults() Deps {
	if d.Env == nil {
		d.Env = os.LookupEnv
	}
	if d.Runner == nil {
		d.Runner = run.Exec{}
	}
	if d.HTTPClient == nil {
		d.HTTPClient = &http.Client{}
	}
	if d.Sink == nil {
		d.Sink = graph.SinkFunc(func(graph.LogEvent) {})
	}
	if d.Clock == nil {
		d.Clock = graph.SystemClock{}
	}
	if d.Sleep == nil {
		d.Sleep = SleepContext
	}
	if d.LookPath == nil {
		d.LookPath = func(name string) (string, error) {
			if name == "gh" {
				return gh.Path()
			}
			return exec.LookPath(name)
		}
	}
	return d
}

// opFunc performs one operation. It records its requests in st.
type opFunc func(ctx context.Context, st *callState, args map[string]any) (map[string]any, error)

// provider is one configured provider with its resolved transport.
type provider struct {
	name      string
	transport string
	timeout   time.Duration
	ops       map[graph.Operation]opFunc
	// unavailable is set when the transport could not be resolved; every
	// call fails with it and Verify reports it.
	unavailable *failure
}

// Set is the configured integrations: the graph.Integrations hooks call.
// It is safe for concurrent use.
type Set struct {
	providers map[string]*provider
	sink      graph.Sink
	clock     graph.Clock
	red       *redactor
}

// Event names.
const (
	// EventCallFailed is emitted once per failed Call, with the fields
	// work_item, provider, operation, transport, attempts, status (when an
	// HTTP answer was obtained) and error (scrubbed).
	EventCallFailed = "integration.call_failed"
)

// New resolves every configured provider's transport and returns the Set.
// It fails only on a malformed configuration (an unknown transport, a bad
// URL). A provider whose transport cannot be used — no token in the
// environment, no gh on PATH — is kept as unavailable: Verify reports it
// for graphs that need it, and calls to it fail naming the remedy. New runs
// no program and makes no request; a secret command runs on first use.
func New(cfg Config, deps Deps) (*Set, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := deps.withDefaults()
	s := &Set{providers: map[string]*provider{}, sink: d.Sink, clock: d.Clock, red: &redactor{}}
	gcfg := cfg.GitHub
	if gcfg == nil {
		gcfg = &GitHubConfig{}
	}
	s.providers["github"] = s.newGitHub(*gcfg, d)
	if cfg.Slack != nil {
		s.providers["slack"] = s.newSlack(*cfg.Slack, d)
	}
	if cfg.Jira != nil {
		s.providers["jira"] = s.newJira(*cfg.Jira, d)
	}
	return s, nil
}

func (s *Set) newGitHub(c GitHubConfig, d Deps) *provider {
	p := &provider{name: "github", timeout: timeoutOf(c.TimeoutSeconds)}
	tokenEnv := c.API.TokenEnv
	if len(tokenEnv) == 0 {
		tokenEnv = DefaultGitHubTokenEnv
	}
	registerEnv(s.red, d.Env, tokenEnv...)
	registerEnv(s.red, d.Env, DefaultGitHubTokenEnv...)
	tok := &secret{
		what: "GitHub token", env: tokenEnv, command: c.API.TokenCommand,
		fix:    "export a token, set integrations.github.api.tokenCommand, or use transport: cli with `gh auth login`",
		lookup: d.Env, runner: d.Runner, red: s.red,
	}
	binary := orDefault(c.CLI.Binary, "gh")
	ghPath, ghErr := d.LookPath(binary)
	policy := &retryPolicy{service: "GitHub", maxAttempts: attemptsOf(c.MaxAttempts), clock: d.Clock, sleep: d.Sleep,
		rateHint: "retry after the reset, or use a token with a higher rate limit"}

	transport := orDefault(c.Transport, TransportAuto)
	if c.App != nil {
		app := newAppCredential(*c.App, d.HTTPClient, nil, d.Clock, d.Env, s.red)
		registerEnv(s.red, d.Env, c.App.keyEnv())
		p.transport = TransportAPI
		if !app.keyPresent() {
			p.unavailable = failFinal(ErrProviderUnavailable,
				"github App %s: no private key — export it (PEM) in %s or set integrations.github.app.privateKeyFile", c.App.Slug, c.App.keyEnv())
			return p
		}
		base, _ := serviceURL(orDefault(c.API.BaseURL, DefaultGitHubBaseURL)) // validated
		app.base = base
		p.ops = (&github{t: newGitHubAPI(d.HTTPClient, base, app), policy: policy}).operations()
		return p
	}
	if transport == TransportAuto {
		switch {
		case tok.present():
			transport = TransportAPI
		case ghErr == nil:
			transport = TransportCLI
		default:
			p.transport = TransportAuto
			p.unavailable = failFinal(ErrProviderUnavailable,
				"github transport auto: no token in %s and no `%s` on PATH — export a token, or install GitHub CLI and run `gh auth login`", envList(tokenEnv), binary)
			return p
		}
	}
	p.transport = transport
	var t githubTransport
	switch transport {
	case TransportAPI:
		if !tok.present() {
			p.unavailable = failFinal(ErrProviderUnavailable,
				"github transport api: no token in %s — export one, set integrations.github.api.tokenCommand, or set transport: cli to use your gh login", envList(tokenEnv))
			return p
		}
		base, _ := serviceURL(orDefault(c.API.BaseURL, DefaultGitHubBaseURL)) // validated
		t = newGitHubAPI(d.HTTPClient, base, tokenCredential{tok})
	case TransportCLI:
		if ghErr != nil {
			p.unavailable = failFinal(ErrProviderUnavailable,
				"github transport cli: `%s` was not found on PATH — install GitHub CLI and run `gh auth login`, set integrations.github.cli.binary, or set transport: api with a token", binary)
			return p
		}
		t = &githubCLI{runner: d.Runner, binary: ghPath, host: strings.ToLower(c.CLI.Host)}
	}
	g := &github{t: t, policy: policy}
	p.ops = g.operations()
	return p
}

// Call performs op. It implements graph.Integrations.
//
// Every call runs under the provider's timeout (and ctx's deadline, if
// sooner). A failed call returns an *Error — scrubbed of credentials,
// naming the operation, transport and fix — and emits exactly one
// EventCallFailed. The result holds no credential either.
func (s *Set) Call(ctx context.Context, op graph.Operation, args map[string]any) (map[string]any, error) {
	st := &callState{}
	p := s.providers[op.Provider()]
	var (
		res map[string]any
		err error
	)
	switch {
	case p == nil:
		err = s.notConfigured(op)
	case p.unavailable != nil:
		err = p.unavailable
	case p.ops[op] == nil:
		err = fail(ErrUnsupportedOperation, "the %s transport of %s does not implement it (it implements %s)", p.transport, p.name, opList(p.ops))
	default:
		cctx, cancel := context.WithTimeout(ctx, p.timeout)
		res, err = p.ops[op](cctx, st, args)
		cancel()
	}
	if err != nil {
		transport := ""
		if p != nil {
			transport = p.transport
		}
		e := s.wrap(op, transport, st, err)
		s.emitFailure(e, args)
		return nil, e
	}
	scrubbed, _ := s.red.scrubValue(res).(map[string]any)
	if scrubbed == nil {
		scrubbed = map[string]any{}
	}
	return scrubbed, nil
}

func (s *Set) notConfigured(op graph.Operation) error {
	name := op.Provider()
	if _, known := catalog[name]; !known {
		return fail(ErrUnsupportedOperation, "there is no integration provider %q (known: github, slack, jira) — the operation name is wrong", name)
	}
	return fail(ErrProviderNotConfigured, "integrations.%s is not configured — %s", name, configureHint[name])
}

var configureHint = map[string]string{
	"github": "add integrations.github to cli-config.yaml",
	"slack":  "add integrations.slack to cli-config.yaml (transport api with api.tokenEnv and channel, or transport webhook with webhook.urlEnv)",
	"jira":   "add integrations.jira to cli-config.yaml (api.baseUrl, api.emailEnv, api.tokenEnv)",
}

// wrap turns any error from an operation into a scrubbed *Error.
func (s *Set) wrap(op graph.Operation, transport string, st *callState, err error) *Error {
	e := &Error{Operation: op, Transport: transport, Attempts: st.attempts, Status: st.status, msg: s.red.scrub(err.Error())}
	var f *failure
	if errors.As(err, &f) && f.status != 0 {
		e.Status = f.status
	}
	e.kinds = classify(err)
	if len(e.kinds) == 0 {
		e.kinds = []error{ErrTransport}
	}
	if errors.Is(err, ErrProviderNotConfigured) && !errors.Is(err, ErrUnsupportedOperation) {
		// Not configured is a deliberate absence: hooks skip on it.
		e.kinds = append(e.kinds, ErrUnsupportedOperation)
	}
	return e
}

func (s *Set) emitFailure(e *Error, args map[string]any) {
	workItem := ""
	for _, k := range []string{"ref", "issue", "repo"} {
		if v, ok := args[k].(string); ok {
			workItem = s.red.scrub(clip(v, 200))
			break
		}
	}
	fields := []graph.Field{
		{Key: "work_item", Value: workItem},
		{Key: "provider", Value: e.Operation.Provider()},
		{Key: "operation", Value: string(e.Operation)},
		{Key: "transport", Value: e.Transport},
		{Key: "attempts", Value: e.Attempts},
	}
	if e.Status != 0 {
		fields = append(fields, graph.Field{Key: "status", Value: e.Status})
	}
	fields = append(fields, graph.Field{Key: "error", Value: e.Error()})
	s.sink.Emit(graph.LogEvent{Time: s.clock.Now(), Name: EventCallFailed, Level: graph.LevelWarning, Fields: fields})
}

// Verify checks, at load, that every operation a hook of g declares in its
// HookSpec.Needs can be performed: its provider is configured, its
// transport resolved, and the transport implements it. It reports every
// problem at once, each naming the operation, the hook, the provider and
// the fix (R6.9). It makes no request.
func (s *Set) Verify(g *graph.Graph) error {
	var problems []VerifyProblem
	for _, h := range g.Hooks() {
		for _, op := range h.Spec.Needs {
			if p := s.check(op); p != nil {
				p.Hook = h.Name
				problems = append(problems, *p)
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return &VerifyError{Graph: g.Name, Problems: problems}
}

func (s *Set) check(op graph.Operation) *VerifyProblem {
	name := op.Provider()
	prob := &VerifyProblem{Operation: op, Provider: name}
	known := false
	for _, ops := range catalog[name] {
		for _, o := range ops {
			known = known || o == op
		}
	}
	p := s.providers[name]
	switch {
	case catalog[name] == nil:
		prob.Err, prob.Reason = ErrUnsupportedOperation, fmt.Sprintf("there is no integration provider %q (known: github, slack, jira) — fix the hook's declared operations", name)
	case !known:
		prob.Err, prob.Reason = ErrUnsupportedOperation, fmt.Sprintf("no %s transport implements it — fix the hook's declared operations (%s implements %s)", name, name, catalogList(name))
	case p == nil:
		prob.Err, prob.Reason = ErrProviderNotConfigured, fmt.Sprintf("provider %s is not configured — %s", name, configureHint[name])
	case p.unavailable != nil:
		prob.Transport = p.transport
		prob.Err, prob.Reason = ErrProviderUnavailable, s.red.scrub(p.unavailable.msg)
	case p.ops[op] == nil:
		prob.Transport = p.transport
		prob.Err, prob.Reason = ErrUnsupportedOperation, fmt.Sprintf("the %s transport of %s does not implement it — set integrations.%s.transport to one that does", p.transport, name, name)
	default:
		return nil
	}
	return prob
}

// ProviderInfo describes a configured provider, for `loopctl config` and
// start-up logs.
type ProviderInfo struct {
	Name string
	// Transport is the resolved transport ("auto" only when it could not
	// be resolved).
	Transport string
	// Operations are the operations the transport implements, sorted.
	Operations []graph.Operation
	// Unavailable says why the provider cannot be used ("" when it can).
	Unavailable string
}

// Providers describes every configured provider, sorted by name.
func (s *Set) Providers() []ProviderInfo {
	var out []ProviderInfo
	for _, p := range s.providers {
		info := ProviderInfo{Name: p.name, Transport: p.transport}
		for op := range p.ops {
			info.Operations = append(info.Operations, op)
		}
		sort.Slice(info.Operations, func(i, j int) bool { return info.Operations[i] < info.Operations[j] })
		if p.unavailable != nil {
			info.Unavailable = s.red.scrub(p.unavailable.msg)
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// catalog declares, per provider and transport, the operations implemented.
var catalog = map[string]map[string][]graph.Operation{
	"github": {TransportAPI: githubOperations, TransportCLI: githubOperations},
	"slack":  {TransportAPI: slackOperations, TransportWebhook: slackOperations},
	"jira":   {TransportAPI: jiraOperations},
}

// Implemented returns the operations a provider's transport implements
// (nil for an unknown pair), so documentation and tools can list them
// without building a Set.
func Implemented(provider, transport string) []graph.Operation {
	return append([]graph.Operation(nil), catalog[provider][transport]...)
}

func catalogList(name string) string {
	seen := map[graph.Operation]bool{}
	var ops []string
	for _, list := range catalog[name] {
		for _, o := range list {
			if !seen[o] {
				seen[o] = true
				ops = append(ops, string(o))
			}
		}
	}
	sort.Strings(ops)
	return strings.Join(ops, ", ")
}

func opList(ops map[graph.Operation]opFunc) string {
	var names []string
	for o := range ops {
		names = append(names, string(o))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

var _ graph.Integrations = (*Set)(nil)
