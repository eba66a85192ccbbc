package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/internal/scrub"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/dispatch"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
	"github.com/theloop-dev/theloop/loop/daemon/slackchan"
	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// Deps is the world the daemon reaches. Every field but Clock is optional.
type Deps struct {
	// Version is the binary's version as status and MCP report it (the
	// stamp `-X main.version=` gives cmd/loopd); "" reads the build info.
	Version string
	// Integrations performs outbound calls (comments, reactions, labels and
	// every graph hook's side effect). Nil: built from Config.Integrations
	// with integrations.New (GitHub through a token or the operator's gh).
	Integrations graph.Integrations
	// HTTPClient is used when Integrations is built here.
	HTTPClient *http.Client
	// Env reads environment variables (default os.LookupEnv).
	Env func(string) (string, bool)
	// Path is the PATH the harness binary (claude) and git are looked up
	// on ("" = the process's PATH).
	Path string
	// CloneURL says where to clone a work item's repository from ("" or
	// nil: https://<host>/<owner>/<repo>.git).
	CloneURL func(item workitem.Ref) string
	// Observer sees every kept webhook, paste, comment and transition.
	Observer Observer
	// Clock is the clock every part of the daemon reads (required: one
	// clock per world; the binary hands it the wall clock).
	Clock graph.Clock
	// Log receives the daemon's human-readable log lines (default
	// os.Stderr).
	Log io.Writer
	// OperatorIntegrations posts the dashboard's gate comments as the
	// operator (Config.Dashboard.Operator); nil offers no gate actions.
	OperatorIntegrations graph.Integrations
	// Logger is the structured logger of the control plane (nil: a text
	// handler on Log).
	Logger *slog.Logger
	// Ownership, when set, sees the ownership log of a clustered daemon
	// (service.node): every lease acquired, released or lost.
	Ownership func(dispatch.Ownership)
	// CommentVerifier re-reads a comment at GitHub before it may decide a
	// gate (docs/decisions.md §19). Nil: NewGitHubCommentVerifier over
	// the daemon's integrations.
	CommentVerifier CommentVerifier
}

// Daemon is one loopd. Build it with New, run it with Run.
type Daemon struct {
	cfg  Config
	deps Deps
	// scrub removes credentials from every log line, event and pasted
	// text (scrub.go).
	scrub *scrub.Scrubber
	// harness is the harnesses loopd hosts (harness.go).
	harness *harnesses
	// shown is the settings as the last reload read them, for the Settings
	// page (nil: as loopd started; dashboard.go).
	shown atomic.Pointer[shownSettings]

	ready chan struct{}
	addr  string
	// observing is false when no Observer was given (no observation is
	// built).
	observing bool

	q     *queue.Queue
	sink  graph.Sink
	elog  *loop.EventLog
	audit *loop.EventLog // audit.go
	integ graph.Integrations
	tmux  *sessions.Tmux
	// worlds is where the sessions run: tmux and the sandbox (worlds.go).
	worlds *agentWorlds
	reg    *sessions.Registry
	mgr    *sessions.Manager
	ws     *sessions.Workspaces
	ctl    *controlStore
	signer *loop.Signer
	recv   *ingress.Receiver
	// recvDeps is what every receiver is built on (pipeline.go), at start
	// and on Reload.
	recvDeps ingress.ReceiverDeps
	link     *graphLink
	intake   *intake
	// live respawns dead sessions (liveness.go).
	live *livenessWatch
	// verifier re-reads a comment before it decides a gate.
	verifier CommentVerifier
	// authority answers routing.authorized (ingress.Authority).
	authority *ingress.Authority

	mu      sync.Mutex
	running bool
	// restarts carries an operator's restart to Run (restart.go).
	restarts *restarts

	// dashHost holds the dashboard while it is served (dashboard.go).
	dashHost *dashHost
	svc      service // the control plane (service.go)

	rec     *reconciler   // the reconcile pass (reconcile.go); nil before wire
	cluster *cluster      // this node's part of a cluster (cluster.go); nil before wire
	desk    *operatorDesk // the operator's verbs (operatorverbs.go); nil before wire

	outbox ticketEffects // the sessions' ticket effects (outbox.go)

	slack *slackchan.Channel // channels.slack (slack.go); nil when off

	usage atomic.Pointer[usageWatch] // the sessions' token usage and budgets (usagewatch.go); nil when off

	notifier *notifier   // loopd's own notifications (notify.go); nil when none
	jira     jiraIngress // webhooks.jiraWebhook (jira.go)
}

// New validates cfg and builds the daemon. It opens nothing: Run does.
func New(cfg Config, deps Deps) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Routing.MaxConcurrentDispatches <= 0 {
		cfg.Routing.MaxConcurrentDispatches = DefaultParallelism
	}
	if cfg.MaxDeliver <= 0 {
		cfg.MaxDeliver = DefaultMaxDeliver
	}
	if cfg.Webhook.Host == "" && cfg.Webhook.Port == 0 {
		cfg.Webhook.Host, cfg.Webhook.Port = defaultListenHost, defaultListenPort
	}
	if cfg.Webhook.Path == "" {
		cfg.Webhook.Path = ingress.DefaultPath // the receiver checks the path (ingress.Config.Validate)
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 30 * time.Second
	}
	mode, _ := loop.ResolveInteractionMode(cfg.Routing.InteractionMode)
	cfg.Routing.InteractionMode = mode
	cfg.EventLog.Path = cfg.EventLogFile()
	if deps.Env == nil {
		deps.Env = os.LookupEnv
	}
	if deps.Clock == nil {
		return nil, errors.New("daemon: Deps.Clock is nil: hand the daemon its clock (graph.SystemClock{} for the wall clock)")
	}
	if deps.Log == nil {
		deps.Log = os.Stderr
	}
	scr := newScrubber(cfg, deps.Env)
	deps.Log = scr.Writer(deps.Log)
	if deps.Logger != nil {
		deps.Logger = slog.New(scr.Handler(deps.Logger.Handler()))
	}
	// The dashboard's rows (last event, armed items, live updates) are fed
	// by observations, so a served dashboard turns them on.
	observing := deps.Observer != nil || cfg.Dashboard.Listen != ""
	if deps.Observer == nil {
		deps.Observer = ObserverFunc(func(Observation) {})
	}
	d := &Daemon{cfg: cfg, deps: deps, ready: make(chan struct{}), observing: observing, scrub: scr, restarts: newRestarts()}
	d.harness = &harnesses{cfg: &d.cfg, path: searchPath(deps.Path), env: deps.Env}
	d.dashHost = &dashHost{listen: cfg.Dashboard.Listen}
	d.worlds = &agentWorlds{cfg: &d.cfg, harness: d.harness, logf: d.logf}
	return d, nil
}

// Ready is closed once the webhook receiver listens (Addr is valid) and the
// dispatcher runs. A Run that fails before that returns without closing it:
// wait on both.
func (d *Daemon) Ready() <-chan struct{} { return d.ready }

// Addr is the receiver's bound host:port (valid after Ready).
func (d *Daemon) Addr() string { return d.addr }

// WebhookURL is the full URL GitHub (or a stand-in) posts to (valid after
// Ready).
func (d *Daemon) WebhookURL() string { return "http://" + d.addr + d.cfg.Webhook.Path }

// Sink is the queue as an ingress.Sink, observed (valid after Ready): what
// the receiver and the poller hand events to. It keeps nothing that aliases
// ev.Payload once Put returns (the queue publishes an encoded copy; the
// observation holds strings only), so the receiver is built with
// SinkCopiesPayload and reuses its request buffers.
func (d *Daemon) Sink() ingress.Sink {
	return ingress.SinkFunc(func(ctx context.Context, ev *ingress.Event) error {
		err := d.q.Put(ctx, ev)
		d.svc.countWebhook(err)
		if err == nil {
			d.observe(Observation{Kind: KindWebhook, Name: ev.Event, DeliveryID: ev.DeliveryID, WorkItem: firstRef(ev),
				Fields: map[string]any{"action": ev.Action, "source": string(ev.Source)}})
		}
		return err
	})
}

// DeadLetters lists the events that failed dispatch MaxDeliver times
// (valid while running).
func (d *Daemon) DeadLetters(ctx context.Context) ([]queue.DeadLetter, error) {
	if d.q == nil {
		return nil, errors.New("daemon: not running")
	}
	return d.q.DeadLetters(ctx)
}

// Replay puts a dead letter back on the queue (valid while running).
func (d *Daemon) Replay(ctx context.Context, seq uint64) error {
	if d.q == nil {
		return errors.New("daemon: not running")
	}
	return d.q.Replay(ctx, seq)
}

func firstRef(ev *ingress.Event) string {
	if len(ev.WorkItems) > 0 {
		return ev.WorkItems[0].String()
	}
	return ""
}

func (d *Daemon) observe(o Observation) {
	if !d.observing {
		return
	}
	if o.Time.IsZero() {
		o.Time = d.deps.Clock.Now()
	}
	d.deps.Observer.Observe(o)
	d.dashHost.notify(o)
}

func (d *Daemon) logf(format string, args ...any) {
	fmt.Fprintf(d.deps.Log, "loopd: "+format+"\n", args...)
}

// closeBuilt closes what build opened, once the pipeline has stopped: the
// tmux control client, the egress proxy, the notifier, then the logs its
// outcomes go to.
func (d *Daemon) closeBuilt() {
	if d.tmux != nil {
		d.tmux.Close() // its control client (after the dispatcher drained)
		if d.worlds.egress != nil {
			_ = d.worlds.egress.Close()
			// The worlds' root outside the state root goes with the last
			// world (an empty directory; a world that outlives loopd keeps
			// it, and the next start finds it).
			_ = os.Remove(d.worlds.worldsRoot())
		}
	}
	d.notifier.Close() // before the logs its outcomes go to
	if d.elog != nil {
		d.elog.Close()
	}
	d.audit.Close()
}

// Run runs the daemon until ctx is cancelled, then drains and stops. It
// may be called once.
func (d *Daemon) Run(ctx context.Context) (err error) {
	d.mu.Lock()
	if d.running {
		d.mu.Unlock()
		return errors.New("daemon: Run called twice")
	}
	d.running = true
	d.mu.Unlock()

	root := d.cfg.StateRoot
	if err := os.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("daemon: state root %s: %w", root, err)
	}
	unlock, err := lockStateRoot(root)
	if err != nil {
		return err
	}
	defer unlock()

	if err := d.build(); err != nil {
		d.notifier.Close()
		return err
	}
	defer d.closeBuilt()

	host, _ := os.Hostname()
	q, srv, disp, err := d.buildPipeline(ctx, host+":"+root) // pipeline.go
	if err != nil {
		return err
	}
	defer q.Close()
	defer d.intake.close() // after the dispatcher is drained (below)
	dctx, dcancel := context.WithCancel(context.WithoutCancel(ctx))
	dispDone := make(chan error, 1)
	go func() { dispDone <- disp.Run(dctx) }()

	d.rec.start(ctx)              // reconcile.go: restarted by Reload with the new policy
	stopJira := d.jira.start(ctx) // jira.go
	defer stopJira()

	stopService, err := d.startService()
	if err != nil {
		_ = srv.Close()
		d.rec.stop()
		dcancel()
		<-dispDone
		return err
	}
	defer stopService()

	if d.live != nil {
		d.live.Start()
		defer d.live.Close()
	}
	if u := d.openUsage(); u != nil { // usagewatch.go
		d.usage.Store(u)
		u.start()
		defer u.close()
	}
	if d.slack != nil {
		d.slack.Start() // Socket Mode dials Slack; the Events API is already mounted
		defer d.slack.Close()
	}

	stopOutbox, err := d.outbox.start(d.cfg.StateRoot, d.reg, d.link, d.integ, d.sink, d.deps.Clock)
	if err != nil {
		_ = srv.Close()
		d.rec.stop()
		dcancel()
		<-dispDone
		return err
	}
	defer stopOutbox()

	stopDash, derr := d.startDashboard()
	if derr != nil {
		d.logf("the dashboard is unavailable: %v", derr)
	}
	defer stopDash()

	warnMissingPrograms(d.worlds, d.harness.path, d.emit) // logging.go
	d.emit("daemon.started", graph.LevelInfo, graph.Field{Key: "addr", Value: d.addr}, graph.Field{Key: "queue", Value: queueKind(d.cfg.Queue.URL)})
	d.restarts.report(d.emit, d.logf) // restart.go
	if recs, _ := d.reg.List(); len(recs) > 0 {
		cwds := make([]string, 0, len(recs))
		for _, r := range recs {
			cwds = append(cwds, r.Cwd)
		}
		d.link.warnPhases(cwds)
	}
	close(d.ready)

	dispReturned := false
	select {
	case <-ctx.Done():
	case err = <-watchStore(ctx, q, d.logf, d.emit): // persist.go
	case re := <-d.restarts.ch: // restart.go
		err = re
	case err = <-dispDone:
		// The dispatcher stopped on its own (its lease was taken over, or
		// its consumer failed): stop, so a supervisor restarts loopd.
		dispReturned = true
		if err == nil {
			err = errors.New("daemon: the dispatcher stopped")
		}
	}
	// No respawn while stopping; stop taking webhooks, then drain the
	// dispatcher.
	if d.live != nil {
		_ = d.live.Close()
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	_ = srv.Shutdown(sctx)
	scancel()
	d.rec.stop()
	dcancel()
	if !dispReturned {
		if derr := <-dispDone; derr != nil && err == nil {
			err = derr
		}
	}
	why := stopReason(ctx, err)
	d.emit("daemon.stopped", graph.LevelInfo, graph.Field{Key: "reason", Value: why})
	d.logf("stopped: %s", why)
	return err
}

func queueKind(url string) string {
	if url == "" {
		return "embedded"
	}
	return "external"
}

// build creates the parts that need no network: event log, integrations,
// tmux, registry, manager, workspaces, control store, graph link, intake.
func (d *Daemon) build() error {
	root := d.cfg.StateRoot
	if err := d.buildEvents(); err != nil {
		return err
	}

	runner := pathRunner{path: d.deps.Path}
	tmuxRunner := pathRunner{path: d.deps.Path, environ: d.worlds.tmuxEnviron}
	tm, err := sessions.NewConfinedTmux(d.worlds.tmuxConfig(), tmuxRunner, d.worlds.confinement())
	if err != nil {
		return err
	}
	d.tmux = tm
	reg, err := sessions.OpenRegistry(sessions.RegistryDir(root))
	if err != nil {
		return err
	}
	d.reg = reg
	d.worlds.resumeWorlds(tm, reg)
	claude := &sessions.ClaudeCode{Args: d.cfg.Routing.HarnessArgs.Claude}
	if d.cfg.ClaudeEnv != nil {
		claude.Env = *d.cfg.ClaudeEnv
	} else {
		home, _ := os.UserHomeDir()
		getenv := func(k string) string { v, _ := d.deps.Env(k); return v }
		claude.Env = sessions.ClaudeEnvironmentFromEnv(getenv, home, d.cfg.Routing.WorkspaceRoot)
		// routing.harnessTrust / routing.harnessPlugins: false leaves the
		// user's Claude Code config as it is.
		claude.Env.Trust = d.cfg.Routing.HarnessTrust.Enabled
		if d.cfg.Routing.HarnessTrust.Scope != "" {
			claude.Env.TrustScope = d.cfg.Routing.HarnessTrust.Scope
		}
		if d.cfg.Routing.HarnessTrust.AcceptBypass != "" {
			claude.Env.AcceptBypass = d.cfg.Routing.HarnessTrust.AcceptBypass
		}
		claude.Env.Plugin = d.cfg.Routing.HarnessPluginsEnabled
	}
	if err := d.harness.checkDefault(); err != nil {
		return err
	}
	mcfg := sessions.DefaultManagerConfig()
	mcfg.DefaultHarness = d.cfg.Routing.DefaultHarness
	mcfg.ResumeOnRespawn = d.cfg.Routing.Tmux.ResumeOnRespawn
	if d.cfg.Routing.Tmux.ResumeProbe > 0 {
		mcfg.ResumeProbe = d.cfg.Routing.Tmux.ResumeProbe
	}
	mcfg.StateRoot = root
	mcfg.Scrub = d.scrub.String
	if d.cfg.Routing.GraphSpecDir != "" {
		mcfg.SpecDir = d.cfg.Routing.GraphSpecDir
	}
	// A fresh session is pointed at the artifacts the item's graph
	// declares, not a list kept here.
	mcfg.Artifacts = func(rec sessions.Record) []string {
		if d.link == nil {
			return nil
		}
		return d.link.artifactNames(rec)
	}
	mgr, err := sessions.NewManager(mcfg, sessions.Deps{
		Tmux: tm, Registry: reg, Harnesses: d.harness.adapters(claude),
		LookPath: searchPath(d.deps.Path).lookPath, Now: d.deps.Clock.Now,
		Observer:      sessions.ObserverFunc(d.onSession),
		PrepareOutbox: func(id string) (string, error) { return loop.PrepareOutboxDir(d.cfg.StateRoot, id) },
	})
	if err != nil {
		return err
	}
	d.mgr = mgr
	if d.cfg.Routing.WorkspaceRoot != "" {
		ws, err := sessions.NewWorkspaces(sessions.WorkspaceConfig{Root: d.cfg.Routing.WorkspaceRoot}, runner)
		if err != nil {
			return err
		}
		d.ws = ws
	}
	d.ctl = openControlStore(root, d.deps.Clock)
	d.signer = loadSigner(d.cfg.StateRoot, d.logf, d.emit)
	d.link = newGraphLink(linkConfigOf(&d.cfg), linkDeps{
		Registry: d.reg, Manager: d.mgr, Tmux: d.tmux, Control: d.ctl,
		Integrations: d.integ, Sink: d.sink, Clock: d.deps.Clock,
		Signer: d.signer, Verifier: d.verifier,
		Commands: runner, Git: pathRunner{path: d.deps.Path}, HookObserver: d.svc.hookObserver(),
		Record: d.emit, Logf: d.logf, Observe: d.observe, Authority: d.authority,
		ObservedDir: filepath.Join(root, observedDirName), SnapshotDir: filepath.Join(root, gateSnapshotsDir),
		Scrub:   d.scrubValue,
		JiraKey: d.jira.jiraKey,
	})
	return nil
}

// buildEvents opens the event sinks (event log, audit log, service sinks,
// the drop log) behind the scrubbing observedSink, and the integrations
// that report into them.
func (d *Daemon) buildEvents() error {
	var sinks []graph.Sink
	if d.cfg.EventLog.Path != "" {
		// Written in the background: the webhook path logs every event
		// (FlushLogs, and Close at the end of Run, write what waits).
		el, err := loop.OpenEventLog(d.cfg.EventLog.Path, "loopd", loop.EventLogOptions{Clock: d.deps.Clock, Warnings: d.deps.Log, Background: true})
		if err != nil {
			d.logf("the event log is unavailable: %v", err)
		} else {
			d.elog = el
		}
	}
	d.openAudit() // audit.go
	if d.elog != nil || d.audit != nil {
		sinks = append(sinks, logsSink{events: d.elog, audit: d.audit})
	}
	svcSinks, err := d.svc.openSinks(d.cfg.Service, d.deps.Clock, serviceProbes{health: d.Health, liveSessions: liveSessions(func() *sessions.Registry { return d.reg }),
		queue: func(ctx context.Context) (queue.Stats, error) {
			if d.q == nil {
				return queue.Stats{}, errors.New("daemon: not running")
			}
			return d.q.Stats(ctx)
		}})
	if err != nil {
		return err
	}
	sinks = append(sinks, svcSinks...)
	sinks = append(sinks, newDropLog(d.deps.Log, d.deps.Clock.Now, DropLogInterval))
	sinks = append(sinks, newJournalSink(d.deps.Log, d.deps.Clock.Now))
	if d.notifier = newNotifier(d.cfg.Notifications, d.deps.Clock.Now, d.sendNotice); d.notifier != nil {
		sinks = append(sinks, d.notifier)
	}
	d.sink = &observedSink{d: d, next: sinks}

	integ := d.deps.Integrations
	if integ == nil {
		set, err := integrations.New(d.cfg.Integrations, integrations.Deps{Env: integrations.Env(d.deps.Env), HTTPClient: d.svc.httpClient(d.deps.HTTPClient), Sink: d.sink, Clock: d.deps.Clock})
		if err != nil {
			return fmt.Errorf("daemon: integrations: %w", err)
		}
		integ = set
	}
	d.integ = d.svc.instrument(&observedIntegrations{d: d, next: integ})
	auth, err := ingress.NewAuthority(d.cfg.Routing.Authorized, d.cfg.Routing.AuthorizedCache, ingress.AuthorityDeps{Integrations: d.integ, Clock: d.deps.Clock})
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	d.authority = auth
	verifier := d.deps.CommentVerifier
	if verifier == nil {
		verifier = NewGitHubCommentVerifier(d.integ)
	}
	if d.jira, err = newJiraIngress(d.cfg.Jira); err != nil { // jira.go
		return err
	}
	d.verifier = d.jira.verifier(verifier, d.integ)
	return nil
}

// policyChanged hands the configuration in force to the parts that hold a
// copy of theirs (Reload, under the policy write lock).
func (d *Daemon) policyChanged() {
	if d.intake != nil {
		d.intake.setConfig(intakeConfigOf(&d.cfg))
	}
	if d.link != nil {
		d.link.setConfig(linkConfigOf(&d.cfg))
	}
}

// closeOptionsOf is what closing a work item's session leaves behind
// (routing.tmux.keepSessionOnClose, killHarnessOnClose,
// harnessKillGraceSeconds; docs/daemon.md §6.6).
func closeOptionsOf(c *Config) sessions.CloseOptions {
	return sessions.CloseOptions{KeepTmux: c.Routing.Tmux.KeepSessionOnClose, KillHarness: c.Routing.Tmux.KillHarnessOnClose, Grace: c.Routing.Tmux.HarnessKillGrace}
}

// searchPath is the PATH loopd finds its programs on (Deps.Path; "" is
// the process's PATH).
type searchPath string

// lookPath resolves a program on p (else the process's PATH).
func (p searchPath) lookPath(name string) (string, error) {
	if p == "" || strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	for _, dir := range filepath.SplitList(string(p)) {
		if dir == "" {
			continue
		}
		f := filepath.Join(dir, name)
		if fi, err := os.Stat(f); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return f, nil
		}
	}
	return "", fmt.Errorf("%s: %w on PATH %s", name, exec.ErrNotFound, string(p))
}

// pathRunner runs loopd's own programs (tmux, git, a hook's command) with
// PATH set to path (when set). environ is the environment they start from:
// nil is run's allowlist (run.Exec), never loopd's own environment.
type pathRunner struct {
	path    string
	environ func() []string
}

func (p pathRunner) Run(ctx context.Context, c run.Cmd) (run.Result, error) {
	if p.path != "" {
		c.Env = append(c.Env[:len(c.Env):len(c.Env)], "PATH="+p.path)
	}
	return run.Exec{Environ: p.environ}.Run(ctx, c)
}

// Start implements run.Starter (the tmux runner's control client), with
// the environment Run gives.
func (p pathRunner) Start(c run.Cmd) (*run.Process, error) {
	if p.path != "" {
		c.Env = append(c.Env[:len(c.Env):len(c.Env)], "PATH="+p.path)
	}
	return run.Exec{Environ: p.environ}.Start(c)
}

// lockStateRoot takes the one-instance lock: flock on <root>/loopd.lock.
func lockStateRoot(root string) (func(), error) {
	p := filepath.Join(root, "loopd.lock")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("daemon: lock file %s: %w", p, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("daemon: %s is held: %w; stop the other loopd or use another --state-root", p, ErrLocked)
		}
		return nil, fmt.Errorf("daemon: lock %s: %w", p, err)
	}
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "%d\n", os.Getpid())
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// emit writes an event to the event log and the observer.
// scrubValue is loopd's scrubber as a value cleaner (nothing when none).
func (d *Daemon) scrubValue(v any) any {
	if d.scrub == nil {
		return v
	}
	return d.scrub.Value(v)
}

func (d *Daemon) emit(name string, level graph.Level, fields ...graph.Field) {
	d.sink.Emit(graph.LogEvent{Time: d.deps.Clock.Now(), Name: name, Level: level, Fields: fields})
}

// dispatchObserver writes the dispatcher's observations to the event log.
func dispatchObserver(emit emitFunc) func(dispatch.Observation) {
	return func(o dispatch.Observation) { observeDispatch(emit, o) }
}

func observeDispatch(emit emitFunc, o dispatch.Observation) {
	switch o.Outcome {
	case dispatch.OutcomeDropped:
		return // the intake logged dispatch.dropped with its reason
	case dispatch.OutcomePaced, dispatch.OutcomeUnpaced:
		// A burst of webhooks began or ended (docs/daemon.md §6.5): no event
		// of its own, and the queue's backlog says how far behind it is.
		emit("dispatch."+string(o.Outcome), graph.LevelInfo)
		return
	}
	level := graph.LevelInfo
	fields := []graph.Field{{Key: "key", Value: o.Key}, {Key: "delivery_id", Value: o.DeliveryID}, {Key: "seq", Value: o.Seq}, {Key: "attempt", Value: o.Attempt}}
	if o.Err != nil {
		level = graph.LevelWarning
		fields = append(fields, graph.Field{Key: "error", Value: o.Err.Error()})
	}
	if o.Outcome == dispatch.OutcomeDeadLettered {
		level = graph.LevelError
	}
	emit("dispatch."+string(o.Outcome), level, fields...)
}

func (d *Daemon) onSession(o sessions.Observation) {
	fields := []graph.Field{{Key: "work_item", Value: o.Item.String()}, {Key: "session_id", Value: o.SessionID}, {Key: "tmux_target", Value: o.TmuxName}}
	for k, v := range o.Detail {
		fields = append(fields, graph.Field{Key: k, Value: v})
	}
	level := graph.LevelInfo
	if o.Err != nil {
		level = graph.LevelWarning
		fields = append(fields, graph.Field{Key: "error", Value: o.Err.Error()})
	}
	d.emit(o.Event, level, fields...)
	if (o.Event == "session.spawned" || o.Event == "session.respawned") && o.Err == nil {
		if d.slack != nil {
			d.slack.OpenThreadInBackground(o.Item) // a slow or failing Slack never holds up a spawn
		}
	}
}

// Pending reports how many kept events are not yet acknowledged (valid
// while running).
func (d *Daemon) Pending(ctx context.Context) (uint64, error) {
	if d.q == nil {
		return 0, errors.New("daemon: not running")
	}
	return d.q.Pending(ctx)
}

// loadSigner creates (once) and loads the decision-signing key under the
// state root (docs/decisions.md §16): gate decisions the daemon records
// from authorized comments are signed with it. Without a usable key the
// daemon still runs; decisions are recorded unsigned (a verifier with a
// trust anchor refuses them) and the reason is logged.
func loadSigner(stateRoot string, logf func(string, ...any), emit emitFunc) *loop.Signer {
	pub, created, err := loop.InitSigningKey(stateRoot)
	if err == nil {
		var s *loop.Signer
		if s, err = loop.LoadSigningKey(stateRoot); err == nil {
			if created {
				logf("created the decision-signing key %s; its public key %s is what `loopctl` and CI trust (--trust-key / THE_LOOP_TRUST_KEYS)", loop.SigningKeyPath(stateRoot), pub)
			}
			return s
		}
	}
	logf("gate decisions will be recorded UNSIGNED: %v", err)
	emit("daemon.signing_unavailable", graph.LevelWarning, graph.Field{Key: "error", Value: err.Error()})
	return nil
}
