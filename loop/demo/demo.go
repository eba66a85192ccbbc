// Package demo is `loopd demo`: the real daemon walking one GitHub issue
// through the-loop, on this machine, touching nobody's repository or
// account.
//
// Run wires, in a temporary directory:
//
//   - a local git repository that adopts the-loop (the "remote" the daemon
//     clones into a worktree per work item);
//   - integrations/githubsim, an in-process GitHub stand-in (REST + signed
//     webhooks) holding the repository demo/widgets;
//   - the real daemon (package loop/daemon) with its embedded JetStream
//     queue, its webhook receiver verifying a freshly generated secret, real
//     git worktrees and real tmux on a private server (tmux -L), so the
//     user's own tmux server is never touched;
//   - `claude` on the daemon's PATH pointing at the scripted agent
//     (package loop/demo/agent, run by the caller's binary, inside loopd's
//     sandbox), which writes the artifacts and claims each node with
//     `loopctl graph complete`'s runtime, its ticket effects performed by
//     loopd from the session's outbox.
//
// It then plays the human, dana: opens issue #1, labels it with the
// auto-execute label, answers the phase selection, and at each approval
// gate asks the person at the terminal (or answers for them with Yes). At
// the first gate it also shows the two failures users of other bots know:
// mallory, who is not authorized, comments "Approved" and nothing moves;
// GitHub redelivers dana's approval under the same delivery id and nothing
// happens twice; and the scripted agent, sandboxed like any agent loopd
// hosts (Landlock, an allowlisted environment without token or secret),
// tries to approve its own work — the signing key, a forged webhook, the
// operator socket, loopd's environment — and the demo prints each refusal
// and that nothing moved. It
// prints every webhook sent, every paste into the session, every comment
// theloop posts and every graph transition, and tells the person how to
// attach to the agent's tmux session. Close kills the private tmux server
// and removes the directory unless Keep.
package demo

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/harness"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
	demoagent "github.com/theloop-dev/theloop/loop/demo/agent"
	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// The demo's fixed cast.
const (
	Owner    = "demo"
	Repo     = "widgets"
	RepoFull = Owner + "/" + Repo
	Human    = "dana"
	Stranger = "mallory"
	BotLogin = "theloop-bot"
	WorkItem = "issue-1"
	Label    = daemon.DefaultAutoExecuteLabel
	issueNum = 1
	issueRef = "github:" + RepoFull + "#1"
)

// TokenEnv is the name the daemon's integrations read the stand-in's token
// under. Its value comes from Options.Token, handed to the integrations
// directly: it is not in the process environment, never in a file, and
// never reaches the agent, whose claims need no credential (loopd performs
// their ticket effects from the session's outbox).
const TokenEnv = "THE_LOOP_DEMO_GH_TOKEN"

// Errors callers branch on.
var (
	// ErrMissingTool: tmux or git is not installed.
	ErrMissingTool = errors.New("demo: a required program is missing")
	// ErrNotApproved: the person declined an approval; the work item waits
	// at the gate (not a failure of the demo).
	ErrNotApproved = errors.New("demo: not approved")
)

// Options configure Run.
type Options struct {
	// Yes answers every approval prompt with yes.
	Yes bool
	// Keep keeps the temporary directory (repository, worktree, state,
	// event log) and prints where it is.
	Keep bool
	// In answers the prompts (default: nothing, i.e. "no").
	In io.Reader
	// Out receives the narration.
	Out io.Writer
	// AgentArgv is the command that runs the scripted agent, to which
	// "--config <file> --attack <file> --demo-pid <pid>" and the harness's own arguments
	// are appended (see demoagent.Options) — for
	// loopd, [os.Executable(), "demo", "agent"]. Required.
	AgentArgv []string
	// Token is the stand-in's API token, for the daemon's integrations
	// only. Required.
	Token string
	// Path is the PATH git and tmux are found on (default $PATH).
	Path string
	// StepTimeout bounds each wait (default 2 minutes).
	StepTimeout time.Duration
	// TempDir is where the demo's directory is created (default the
	// system's).
	TempDir string
	// Serve keeps the daemon, the GitHub stand-in and the dashboard up
	// after the walk until ctx ends (Ctrl-C), and Run then returns nil.
	Serve bool
	// Served, when set, is called once the walk is over and the demo
	// serves (with the dashboard's one-time login URL).
	Served func(loginURL string)
}

// Result is what the walk achieved, for the caller's summary and tests.
type Result struct {
	// Node is the work item's current node when the demo ended.
	Node string
	// Complete: the walk reached the terminal node and `check
	// --recompute` agrees.
	Complete bool
	// TrustKey is the daemon's decision-signing public key, the trust
	// anchor of the closing check ("" when the daemon made none).
	TrustKey string
	// TrustedCheck is the closing `loopctl check issue-1 --recompute
	// --fail-on block --trust-key <TrustKey>` (the README's CI line) and
	// Trusted whether it passed: no node at or before the current one
	// blocks, every gate decision verified against the daemon's key
	// (docs/decisions.md §21).
	TrustedCheck string
	Trusted      bool
	// Gates lists the approval gates passed, in order.
	Gates []string
	// Labels are issue #1's labels at the end.
	Labels []string
	// Comments counts the comments theloop posted on issue #1.
	Comments int
	// Webhooks counts the webhooks the stand-in delivered (2xx).
	Webhooks int
	// Requests counts the REST requests theloop made to the stand-in.
	Requests int
	// Pastes counts the texts pasted into the agent's session.
	Pastes int
	// SelfApproval are the agent's attempts to approve its own work at the
	// first gate, as it reported them; SelfApprovalRefused: every attempt
	// got it nothing (and, checked by the demo itself, the gate did not
	// move — else Run fails).
	SelfApproval        []demoagent.Attempt
	SelfApprovalRefused bool
	// IgnoredStranger: an unauthorized "Approved" left the first gate
	// where it was.
	IgnoredStranger bool
	// Redelivered is the delivery id of dana's first approval, sent twice.
	Redelivered string
	// OutboxLatencies are the claim → ticket times of the effects loopd
	// performed from the agent session's outbox, in order.
	OutboxLatencies []time.Duration
	// OutboxRefused counts the intents loopd refused.
	OutboxRefused int
	// SignedDecisions counts the gate decisions recorded with a signature.
	SignedDecisions int
	// Attach is the command that attaches to the agent's session.
	Attach string
	// Dir is the demo's directory (removed unless Keep).
	Dir string
	// Checkout is the work item's worktree.
	Checkout string
}

// RandomSecret returns 32 random bytes, hex-encoded: the webhook secret and
// the stand-in's token.
func RandomSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// lookPath finds name on path.
func lookPath(name, path string) error {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not on PATH — loopd demo runs the agent in real tmux sessions on real git worktrees; install %s (e.g. `apt-get install %s` or `brew install %s`) and run it again", ErrMissingTool, name, name, name, name)
}

// Run runs the demo. It returns ErrNotApproved when the person declined a
// gate (the result says where the work item waits), ErrMissingTool when
// tmux or git is missing, and ctx's error when interrupted; everything it
// started is stopped and, unless Keep, removed before it returns.
func Run(ctx context.Context, opts Options) (res *Result, err error) {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.In == nil {
		opts.In = strings.NewReader("")
	}
	if opts.Path == "" {
		opts.Path = os.Getenv("PATH")
	}
	if opts.StepTimeout <= 0 {
		opts.StepTimeout = 2 * time.Minute
	}
	if len(opts.AgentArgv) == 0 || opts.Token == "" {
		return nil, errors.New("demo: Options.AgentArgv and Options.Token are required")
	}
	for _, tool := range []string{"tmux", "git"} {
		if err := lookPath(tool, opts.Path); err != nil {
			return nil, err
		}
	}
	w := &world{opts: opts, res: &Result{}, p: newPrinter(opts.Out), in: bufio.NewReader(opts.In), routedAway: map[string]string{}, kept: map[string]bool{}}
	defer func() {
		if cerr := w.close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	if err := w.setUp(ctx); err != nil {
		return w.res, err
	}
	err = w.walk(ctx)
	if opts.Serve && (err == nil || errors.Is(err, ErrNotApproved)) {
		// A gate declined at the prompt waits on the dashboard instead.
		if serr := w.summary(context.WithoutCancel(ctx)); serr != nil {
			return w.res, serr
		}
		return w.res, w.serve(ctx)
	}
	// Stop the daemon first, so the summary is the last word.
	if serr := w.stopDaemon(); err == nil && serr != nil {
		err = serr
	}
	if serr := w.summary(context.WithoutCancel(ctx)); err == nil && serr != nil {
		err = serr
	}
	return w.res, err
}

// world is one demo run.
type world struct {
	opts Options
	res  *Result
	p    *printer
	in   *bufio.Reader

	dir, remote, state, config, binDir string
	agentDir, agentLog, brief          string
	socket                             string
	item                               workitem.Ref
	sim                                *githubsim.Server
	d                                  *daemon.Daemon
	cancel                             context.CancelFunc
	done                               chan error
	tail, agentTail                    *tailer
	mu                                 sync.Mutex
	attachShown                        bool
	routedAway                         map[string]string // delivery id → why the receiver did not queue it
	// noWorlds is why the agent runs without the namespace sandbox (nil: it
	// has one).
	noWorlds error
	kept     map[string]bool // delivery ids the queue kept

	// The person's answers (walk.go: answerLines); inEnded once the input
	// ended; answeredElsewhere while the last prompt was answered by a
	// decision in the dashboard.
	answersOnce       sync.Once
	answers           chan answer
	inEnded           bool
	answeredElsewhere bool
}

// demoBase is where the demo's directory goes: dir when set, else the
// temp dir — unless that is so long (macOS's $TMPDIR, a CI's) that the
// daemon's control socket, <dir>/theloop-demo-N/state/loopd.sock, would pass
// the unix socket limit; then /tmp, which every unix system has.
func demoBase(dir string) string {
	if dir != "" {
		return dir
	}
	dir = os.TempDir()
	const socketTail = "/theloop-demo-1234567890/state/loopd.sock"
	if len(dir)+len(socketTail) > maxSocketPath {
		if fi, err := os.Stat("/tmp"); err == nil && fi.IsDir() {
			return "/tmp"
		}
	}
	return dir
}

// maxSocketPath is the longest unix socket path every platform takes
// (sun_path is 104 bytes on macOS and the BSDs, 108 on Linux, with a NUL).
const maxSocketPath = 103

func (w *world) setUp(ctx context.Context) error {
	var err error
	if w.dir, err = os.MkdirTemp(demoBase(w.opts.TempDir), "theloop-demo-"); err != nil {
		return err
	}
	w.res.Dir = w.dir
	w.item, err = workitem.Parse(issueRef)
	if err != nil {
		return err
	}
	// Private to this run: two demos (or two tests in one process) never
	// share a server.
	w.socket = fmt.Sprintf("%s%d-%s", demoagent.DemoSocketPrefix, os.Getpid(), RandomSecret()[:4])
	w.res.Attach = fmt.Sprintf("tmux -L %s attach -t %s", w.socket, sessions.TmuxName(w.item))
	w.state = filepath.Join(w.dir, "state")
	w.p.say("theloop demo — the real loopd walks GitHub issue #1 through %s", loop.WorkItemLoop)
	w.p.say("  everything runs here, in %s: a stand-in for GitHub on 127.0.0.1, a local git", w.dir)
	w.p.say("  repository, the daemon with its embedded queue, and a scripted agent in tmux.")
	w.p.say("  No repository or account of yours is touched.")
	w.p.say("")

	// The "remote": a bare repository whose path ends in owner/repo, so the
	// daemon's repository-identity check accepts the clone.
	seed := filepath.Join(w.dir, "seed")
	if err := os.MkdirAll(seed, 0o755); err != nil {
		return err
	}
	if err := demoagent.InitRepo(ctx, seed, Owner, Repo, Human); err != nil {
		return err
	}
	w.remote = filepath.Join(w.dir, "remote", Owner, Repo+".git")
	if err := w.git(ctx, w.dir, "clone", "-q", "--bare", seed, w.remote); err != nil {
		return err
	}

	// The GitHub stand-in. Its webhook goes to the daemon once that listens.
	secret := RandomSecret()
	w.sim, err = githubsim.Start(githubsim.Config{Token: w.opts.Token, BotLogin: BotLogin, OnDelivery: w.onDelivery, OnRequest: w.onRequest})
	if err != nil {
		return err
	}
	if err := w.sim.AddRepo(RepoFull, githubsim.RepoOptions{CloneURL: "file://" + w.remote}); err != nil {
		return err
	}

	// The agent's own directory, outside the state root and granted to its
	// sandbox (Config.SandboxWritable): its claim-side CLI config (dana
	// authorized; no credential — in a loopd session a claim's ticket
	// effects go through loopd's outbox), its own event log (loopd's, under
	// the state root, is out of its reach) and the attack brief.
	w.agentDir = filepath.Join(w.dir, "agent")
	if err := os.MkdirAll(w.agentDir, 0o700); err != nil {
		return err
	}
	w.config = filepath.Join(w.agentDir, "cli-config.yaml")
	w.brief = filepath.Join(w.agentDir, "attack-brief.json")
	w.agentLog = filepath.Join(w.agentDir, "events.jsonl")
	cfgText := fmt.Sprintf(`# loopd demo: the scripted agent's CLI config (no credential: its claims'
# ticket effects are intents loopd performs from the session's outbox)
routing:
  authorizedUsers: [%s]
eventLog: {enabled: true, path: %q}
`, Human, w.agentLog)
	if err := os.WriteFile(w.config, []byte(cfgText), 0o600); err != nil {
		return err
	}

	// `claude` on the daemon's PATH is the scripted agent.
	w.binDir = filepath.Join(w.dir, "bin")
	if err := os.MkdirAll(w.binDir, 0o755); err != nil {
		return err
	}
	script := "#!/bin/sh\n# loopd demo: `claude` is theloop's scripted agent (package loop/demo/agent)\nexec"
	// --demo-pid: the agent ends its tmux server if this process dies
	// without cleaning up.
	// --attack: the brief of its attempt to approve its own work.
	for _, a := range append(append([]string{}, w.opts.AgentArgv...), "--config", w.config, "--attack", w.brief, "--demo-pid", strconv.Itoa(os.Getpid())) {
		script += " " + shellQuote(a)
	}
	script += ` "$@"` + "\n"
	if err := os.WriteFile(filepath.Join(w.binDir, harness.Claude.Binary), []byte(script), 0o755); err != nil {
		return err
	}
	eventLog := filepath.Join(w.state, "logs", "events.jsonl")
	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		Transport: integrations.TransportAPI, API: integrations.GitHubAPIConfig{BaseURL: w.sim.URL(), TokenEnv: []string{TokenEnv}},
	}}, integrations.Deps{Env: func(k string) (string, bool) { return w.opts.Token, k == TokenEnv }})
	if err != nil {
		return err
	}

	cfg := daemon.DefaultConfig()
	cfg.StateRoot = w.state
	cfg.Webhook.Host, cfg.Webhook.Port = "127.0.0.1", 0
	cfg.Secret = []byte(secret)
	cfg.Repositories = []string{RepoFull}
	cfg.Routing.AuthorizedUsers = []string{Human}
	cfg.Routing.SpawnOnUnmatched = daemon.SpawnLabeled
	cfg.Routing.RequireStartCommand = false
	cfg.Routing.WorkspaceRoot = filepath.Join(w.dir, "workspaces")
	cfg.ClaudeEnv = &sessions.ClaudeEnvironment{} // never touch a real ~/.claude
	// The scripted agent is treated as the untrusted agent it stands in
	// for: confined by Landlock, with the allowlisted environment and
	// nothing more (no token, no secret), its claims' ticket effects
	// performed by loopd from its outbox. Only a kernel without Landlock
	// runs it unconfined, and the demo says so.
	if !sandbox.Available() {
		cfg.Routing.Sandbox = "off"
	}
	if err := sandbox.CheckNamespaces(); err != nil && !cfg.SandboxOff() {
		// The demo still runs where bubblewrap is missing, under Landlock
		// alone, and says so (loopd itself refuses to spawn there unless
		// routing.sandbox: landlock is set).
		cfg.Routing.Sandbox = "landlock"
		w.noWorlds = err
	}
	cfg.SandboxWritable = []string{w.agentDir}
	cfg.ReconcileInterval = -1
	cfg.EventLog.Path = eventLog
	cfg.Dashboard.Listen = "127.0.0.1:0"
	cfg.Tmux.Socket = w.socket
	cfg.Tmux.TempDir = filepath.Join(w.dir, "tmp")
	if err := os.MkdirAll(cfg.Tmux.TempDir, 0o700); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(w.dir, "loopd.log"))
	if err != nil {
		return err
	}
	// The dashboard's operator is dana, with her own client of the
	// stand-in: the gate buttons show, and a click posts her comment,
	// which comes back through the webhook, ingress and authorization.
	cfg.Dashboard.Operator = Human
	cfg.Routing.WebTerminal = daemon.WebTerminalReply
	operatorToken := RandomSecret()
	if err := w.sim.AddUser(operatorToken, Human); err != nil {
		return err
	}
	operator, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		Transport: integrations.TransportAPI, API: integrations.GitHubAPIConfig{BaseURL: w.sim.URL(), TokenEnv: []string{TokenEnv}},
	}}, integrations.Deps{Env: func(k string) (string, bool) { return operatorToken, k == TokenEnv }})
	if err != nil {
		return err
	}
	w.d, err = daemon.New(cfg, daemon.Deps{
		Clock:                graph.SystemClock{},
		Integrations:         set,
		OperatorIntegrations: operator,
		Path:                 w.binDir + string(os.PathListSeparator) + w.opts.Path,
		CloneURL:             func(workitem.Ref) string { return w.remote },
		Observer:             daemon.ObserverFunc(w.observe),
		Log:                  log,
	})
	if err != nil {
		log.Close()
		return err
	}
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel, w.done = cancel, make(chan error, 1)
	go func() { w.done <- w.d.Run(dctx); log.Close() }()
	select {
	case <-w.d.Ready():
	case err := <-w.done:
		w.cancel = nil
		return fmt.Errorf("demo: the daemon did not start: %w (its log: %s)", err, filepath.Join(w.dir, "loopd.log"))
	case <-ctx.Done():
		return ctx.Err()
	}
	if _, err := w.sim.AddHook(githubsim.Hook{URL: w.d.WebhookURL(), Secret: secret}); err != nil {
		return err
	}
	// What an attacker in the session could find anyway — loopd's webhook
	// URL (GitHub posts to it) and its pid (/proc) — and never a secret.
	if err := demoagent.WriteAttackBrief(w.brief, demoagent.AttackBrief{
		Gate: gates[0].node, WebhookURL: w.d.WebhookURL(), LoopdPID: os.Getpid(),
		Repo: RepoFull, Issue: issueNum, Approver: Human,
	}); err != nil {
		return err
	}
	w.tail = startTail(eventLog, w.onEvent)
	w.agentTail = startTail(w.agentLog, w.onEvent)
	w.p.say("loopd listens on %s (signed webhooks, secret generated for this run)", w.d.WebhookURL())
	w.p.say("GitHub stand-in at %s", w.sim.URL())
	w.p.say("dashboard (one-time login URL): %s", w.d.DashboardLoginURL())
	switch {
	case sandbox.Available() && w.noWorlds == nil:
		w.p.say("the agent runs in a world of its own: a bubblewrap sandbox (its own clone, tmux server and network; Landlock ABI %d inside), no token, no webhook secret", sandbox.ABI())
	case sandbox.Available():
		w.p.say("the agent runs DEGRADED, under Landlock (ABI %d) only: %v", sandbox.ABI(), w.noWorlds)
	default:
		w.p.say("WARNING: this kernel offers no Landlock — the agent runs UNCONFINED (routing.sandbox: off);")
		w.p.say("  its environment is still allowlisted, but it could read loopd's keys and state. Gates are not defended.")
	}
	w.p.say("")
	return nil
}

func (w *world) git(ctx context.Context, dir string, args ...string) error {
	// Hardened as every git loopd runs (run.Git), with the allowlisted
	// environment.
	cmd := exec.CommandContext(ctx, "git", run.GitArgs(args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(run.AllowedEnv(os.Environ(), nil), run.GitEnv()...), "PATH="+w.opts.Path)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}

// close stops everything this run started and removes its directory unless
// Keep.
func (w *world) close() error {
	err := w.stopDaemon()
	if w.d != nil {
		if tm := w.d.Sessions(); tm != nil && tm.Worlds() {
			// The agent's world outlives loopd by design (a restart keeps
			// sessions); the demo's ends with it.
			w.res.Attach = w.attach()
			_ = tm.Kill(context.Background(), sessions.TmuxName(w.item))
		}
	}
	if w.sim != nil {
		w.sim.Close()
	}
	if w.socket != "" {
		// Our private tmux server only; the user's is never addressed.
		// kill-server leaves its socket file behind: ask for its path
		// first, remove it after.
		where := exec.Command("tmux", "-L", w.socket, "display-message", "-p", "#{socket_path}")
		where.Env = append(run.AllowedEnv(os.Environ(), nil), "PATH="+w.opts.Path)
		out, werr := where.Output()
		kill := exec.Command("tmux", "-L", w.socket, "kill-server")
		kill.Env = where.Env
		_ = kill.Run()
		sock := strings.TrimSpace(string(out))
		if werr != nil || filepath.Base(sock) != w.socket {
			// The server is gone already (a failed walk, the agent's
			// orphan watch): its socket file may still be there, where
			// tmux puts it.
			base := os.Getenv("TMUX_TMPDIR")
			if base == "" {
				base = "/tmp"
			}
			sock = filepath.Join(base, fmt.Sprintf("tmux-%d", os.Getuid()), w.socket)
		}
		_ = os.Remove(sock)
	}
	if w.dir != "" {
		if w.opts.Keep {
			w.p.say("kept: %s (state, event log, the worktree; remove it when done)", w.dir)
		} else if rerr := os.RemoveAll(w.dir); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// stopDaemon stops the daemon (draining what it was doing) and the
// event-log tail; it is a no-op the second time.
func (w *world) stopDaemon() error {
	var err error
	if w.cancel != nil {
		w.cancel()
		select {
		case err = <-w.done:
		case <-time.After(60 * time.Second):
			err = errors.New("demo: the daemon did not stop within 60s")
		}
		w.cancel = nil
	}
	for _, t := range []**tailer{&w.tail, &w.agentTail} {
		if *t != nil {
			(*t).stop()
			*t = nil
		}
	}
	return err
}

// serve keeps everything up until ctx ends: the dashboard stays live
// (its gate buttons post as dana) and the session stays attachable.
func (w *world) serve(ctx context.Context) error {
	url := w.d.DashboardLoginURL()
	w.p.say("")
	w.p.say("serving until Ctrl-C: the dashboard (one-time login URL) %s", url)
	w.p.say("  its gate buttons comment as %s through the stand-in; watch the agent with %s", Human, w.attach())
	if w.opts.Served != nil {
		w.opts.Served(url)
	}
	select {
	case <-ctx.Done():
	case err := <-w.done:
		w.cancel = nil
		return fmt.Errorf("demo: the daemon stopped while serving: %w", err)
	}
	w.p.say("stopping")
	return w.stopDaemon()
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// attach is the command that attaches to the agent's session: boxed when
// the session has a world of its own (its tmux server is the agent's).
func (w *world) attach() string {
	if w.d != nil {
		if tm := w.d.Sessions(); tm != nil {
			return tm.AttachCommand(sessions.TmuxName(w.item))
		}
	}
	return w.res.Attach
}
