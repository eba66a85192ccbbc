package sessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/theloop-dev/theloop/internal/lazyre"
	"github.com/theloop-dev/theloop/run"
)

// TmuxConfig configures the tmux runner. Start from DefaultTmuxConfig; zero
// durations and sizes are replaced by the defaults in NewTmux.
type TmuxConfig struct {
	// Binary is the tmux program (default "tmux").
	Binary string
	// Socket selects a named server (tmux -L). Empty means the user's default
	// server, which is what lets an operator `tmux attach -t loop-…`. Tests
	// use a unique name so they never touch the operator's server.
	Socket string
	// SocketPath selects a server by socket path (tmux -S). At most one of
	// Socket and SocketPath may be set.
	SocketPath string
	// RemainOnExit keeps a session's pane after the harness exits, so an
	// operator can read its last words; the runner then sees it as dead and
	// clears it before respawning.
	RemainOnExit bool
	// Width and Height size the detached window (agent TUIs need room).
	Width, Height int
	// CommandTimeout bounds every tmux call except probes.
	CommandTimeout time.Duration
	// ProbeTimeout bounds liveness probes; a probe that times out is
	// LivenessUnknown.
	ProbeTimeout time.Duration
	// ReadyTimeout bounds WaitReady.
	ReadyTimeout time.Duration
	// ReadySettle is how long a freshly spawned pane must show the same,
	// non-empty screen before it counts as ready for a paste.
	ReadySettle time.Duration
	// ReceiptTimeout bounds the wait for pasted text to show up in the pane.
	ReceiptTimeout time.Duration
	// PollInterval is the step of every wait loop.
	PollInterval time.Duration
	// TempDir holds the short-lived paste files ("" = os.TempDir()).
	TempDir string
	// NoControl runs every command as a tmux process of its own instead of
	// through a control-mode client kept open (control.go). The client is
	// only used when the runner can start one (run.Starter).
	NoControl bool
}

// DefaultTmuxConfig returns the production defaults: the default tmux
// server, remain-on-exit on, a 200x50 window, 30 s per command, 10 s per
// probe.
func DefaultTmuxConfig() TmuxConfig {
	return TmuxConfig{
		Binary:         "tmux",
		RemainOnExit:   true,
		Width:          200,
		Height:         50,
		CommandTimeout: 30 * time.Second,
		ProbeTimeout:   10 * time.Second,
		ReadyTimeout:   30 * time.Second,
		ReadySettle:    300 * time.Millisecond,
		ReceiptTimeout: 10 * time.Second,
		PollInterval:   50 * time.Millisecond,
	}
}

var socketNamePattern = lazyre.New(`^[A-Za-z0-9._-]+$`)

// Validate reports the first setting that cannot work, naming the field.
func (c TmuxConfig) Validate() error {
	switch {
	case c.Socket != "" && c.SocketPath != "":
		return fmt.Errorf("tmux config: set Socket or SocketPath, not both")
	case c.Socket != "" && !socketNamePattern.MatchString(c.Socket):
		return fmt.Errorf("tmux config: Socket %q may only contain A-Z a-z 0-9 . _ -", c.Socket)
	case c.SocketPath != "" && !filepath.IsAbs(c.SocketPath):
		return fmt.Errorf("tmux config: SocketPath %q must be absolute", c.SocketPath)
	case c.Width < 20 || c.Width > 1000 || c.Height < 5 || c.Height > 1000:
		return fmt.Errorf("tmux config: window %dx%d out of range (20-1000 x 5-1000)", c.Width, c.Height)
	}
	return nil
}

func (c TmuxConfig) withDefaults() TmuxConfig {
	d := DefaultTmuxConfig()
	if c.Binary == "" {
		c.Binary = d.Binary
	}
	if c.Width == 0 {
		c.Width = d.Width
	}
	if c.Height == 0 {
		c.Height = d.Height
	}
	for _, p := range []struct {
		v *time.Duration
		d time.Duration
	}{
		{&c.CommandTimeout, d.CommandTimeout}, {&c.ProbeTimeout, d.ProbeTimeout},
		{&c.ReadyTimeout, d.ReadyTimeout}, {&c.ReadySettle, d.ReadySettle},
		{&c.ReceiptTimeout, d.ReceiptTimeout}, {&c.PollInterval, d.PollInterval},
	} {
		if *p.v <= 0 {
			*p.v = p.d
		}
	}
	return c
}

// Liveness is what tmux says about a session name. The zero value is
// LivenessUnknown, so a liveness nobody computed is never mistaken for
// "absent".
type Liveness int

const (
	// LivenessUnknown: tmux did not answer, or answered something we cannot
	// read. Treat as possibly live: never kill it, never spawn over it.
	LivenessUnknown Liveness = iota
	// LivenessLive: the session exists and at least one pane runs a process.
	LivenessLive
	// LivenessDead: the session exists but every pane's process has exited
	// (remain-on-exit kept it). The name is still taken; it may be cleared.
	LivenessDead
	// LivenessAbsent: tmux answered that no such session exists.
	LivenessAbsent
)

func (l Liveness) String() string {
	switch l {
	case LivenessLive:
		return "live"
	case LivenessDead:
		return "dead"
	case LivenessAbsent:
		return "absent"
	default:
		return "unknown"
	}
}

// Tmux is the only runner of tmux commands in theloop. Every command names
// its target explicitly with an exact-match target (=name), so tmux's
// prefix matching can never hit loop-x-15 when loop-x-1 was meant, and no
// command resolves a tmux client, so a read-only observer attached to a
// session cannot get in the way of delivery.
//
// A Tmux is safe for concurrent use. Close it to end its control client.
type Tmux struct {
	cfg     TmuxConfig
	runner  run.Runner
	confine Confinement
	// world is confine when it gives every session a world of its own
	// (its own tmux server inside its own sandbox); nil otherwise.
	world WorldConfinement
	// ctl is the control-mode client (nil: a tmux process per command).
	// With worlds there is one per session's server, in ctls.
	ctl     *controlClient
	starter run.Starter
	ctlMu   sync.Mutex
	ctls    map[string]*controlClient
}

// WorldConfinement is a Confinement that puts every session in a world of
// its own (docs/decisions.md §22): a namespace sandbox holding the
// session's checkout, its harness and its own tmux server. loopd's tmux
// clients then run against that server from outside, each wrapped by
// Client, because a tmux server can make its client run a command.
type WorldConfinement interface {
	Confinement
	// Socket is the tmux socket of the named session's server (host path).
	Socket(name string) string
	// World prepares the session's world and wraps tmuxArgv (the tmux
	// client that starts the server and creates the session on Socket) so
	// that it runs inside; the wrapped command returns when that client
	// exits, leaving the world running.
	World(name, cwd, registryFile, outboxDir, harness string, tmuxArgv []string) ([]string, error)
	// Client wraps a tmux client argv loopd runs against name's server.
	Client(name string, argv []string) []string
	// EndWorld ends every process left in name's world (after kill-server)
	// and its egress; an absent world is not an error.
	EndWorld(name string) error
	// Attach is the shell command an operator runs to attach to name
	// (a tmux client in a box: the server can make its client run a
	// command).
	Attach(name string) string
	// HostPath is where a path as name's world sees it lies on the host
	// (the world's home is a private copy; other paths are the host's).
	HostPath(name, path string) string
}

// AttachCommand is the shell command that attaches an operator's terminal
// to session name.
func (t *Tmux) AttachCommand(name string) string {
	if t.world != nil {
		return t.world.Attach(name)
	}
	switch {
	case t.cfg.Socket != "":
		return fmt.Sprintf("tmux -L %s attach -t %s", t.cfg.Socket, name)
	case t.cfg.SocketPath != "":
		return fmt.Sprintf("tmux -S %s attach -t %s", t.cfg.SocketPath, name)
	}
	return "tmux attach -t " + name
}

// Confinement is how the tmux runner confines what it starts: the agent's
// session is untrusted (docs/decisions.md §18). Package loop/daemon/sandbox
// implements it; sessions only calls it, so no harness adapter builds its
// own confinement.
type Confinement interface {
	// Server wraps the tmux client command that creates a session (and, on
	// a fresh socket, forks the tmux server), so that the server — and so
	// every pane and every `tmux new-window` an agent runs from a pane —
	// starts confined and with the allowlisted environment. The wrapped
	// command returns when the tmux client exits.
	Server(tmuxArgv []string) ([]string, error)
	// Harness wraps a pane's command: the harness confined to cwd (its
	// worktree), reading registryFile (its registry entry) besides, and
	// writing outboxDir (its outbox, where a claim records the ticket
	// effects loopd performs; "" for none).
	Harness(cwd, registryFile, outboxDir string, argv []string) ([]string, error)
	// CheckServer refuses the tmux server with this pid unless it runs
	// confined (one started by someone else on the same socket is not).
	CheckServer(pid int) error
}

// NewTmux returns a runner for the configured tmux server.
func NewTmux(cfg TmuxConfig, runner run.Runner) (*Tmux, error) {
	return NewConfinedTmux(cfg, runner, nil)
}

// NewConfinedTmux is NewTmux whose sessions start through c (nil: none).
func NewConfinedTmux(cfg TmuxConfig, runner run.Runner, c Confinement) (*Tmux, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if runner == nil {
		return nil, errors.New("sessions.NewTmux: nil runner (pass run.Exec{})")
	}
	t := &Tmux{cfg: cfg, runner: runner, confine: c}
	if w, ok := c.(WorldConfinement); ok {
		t.world = w
	}
	if st, ok := runner.(run.Starter); ok && !cfg.NoControl {
		if t.world != nil {
			t.starter, t.ctls = st, map[string]*controlClient{}
		} else {
			t.ctl = newControlClient(st, cfg.Binary, t.serverArgs(), nil)
		}
	}
	return t, nil
}

// control is the control client for the server hosting session name (nil:
// none; a tmux process per command).
func (t *Tmux) control(name string) *controlClient {
	if t.world == nil {
		return t.ctl
	}
	if t.starter == nil || name == "" {
		return nil
	}
	t.ctlMu.Lock()
	defer t.ctlMu.Unlock()
	if t.ctls == nil {
		return nil // closed
	}
	cc := t.ctls[name]
	if cc == nil {
		cc = newControlClient(t.starter, t.cfg.Binary, t.serverArgsFor(name), func(argv []string) []string { return t.world.Client(name, argv) })
		t.ctls[name] = cc
	}
	return cc
}

// dropControl ends the control client of name's server (it is gone).
func (t *Tmux) dropControl(name string) {
	if t.world == nil {
		return
	}
	t.ctlMu.Lock()
	cc := t.ctls[name]
	delete(t.ctls, name)
	t.ctlMu.Unlock()
	if cc != nil {
		cc.close()
	}
}

// Confinement is what the runner's sessions start through (nil: none).
func (t *Tmux) Confinement() Confinement { return t.confine }

// Worlds reports whether every session runs its own server in a world of
// its own.
func (t *Tmux) Worlds() bool { return t.world != nil }

// HostPath is where path, as session name sees it, lies on the host: in a
// world of its own the harness's home is a private copy, so its files
// (transcripts, session logs) are there. Without worlds, path itself.
// What lies there is the agent's writing: read it confined (os.Root).
func (t *Tmux) HostPath(name, path string) string {
	if t.world == nil {
		return path
	}
	return t.world.HostPath(name, path)
}

// SocketFor is the tmux socket of the server hosting session name.
func (t *Tmux) SocketFor(name string) string {
	if t.world != nil {
		return t.world.Socket(name)
	}
	return t.cfg.SocketPath
}

// Config returns the effective configuration (defaults filled in).
func (t *Tmux) Config() TmuxConfig { return t.cfg }

// Close ends the control client, if one is connected; later commands run
// as tmux processes of their own. It is idempotent.
func (t *Tmux) Close() {
	if t.ctl != nil {
		t.ctl.close()
	}
	t.ctlMu.Lock()
	ctls := t.ctls
	t.ctls = nil
	t.ctlMu.Unlock()
	for _, cc := range ctls {
		cc.close()
	}
}

// serverArgsFor select the server hosting session name.
func (t *Tmux) serverArgsFor(name string) []string {
	if t.world != nil {
		return []string{"-S", t.world.Socket(name)}
	}
	return t.serverArgs()
}

// serverArgs select the configured server.
func (t *Tmux) serverArgs() []string {
	switch {
	case t.cfg.Socket != "":
		return []string{"-L", t.cfg.Socket}
	case t.cfg.SocketPath != "":
		return []string{"-S", t.cfg.SocketPath}
	}
	return nil
}

// tmuxArgSafe refuses arguments tmux would reinterpret: one ending in ";"
// ends the tmux command and starts another (so a harness argument "x;"
// followed by "kill-server" would run it), and NUL cannot pass through argv.
func tmuxArgSafe(a string) error {
	if strings.HasSuffix(a, ";") {
		return fmt.Errorf("%w: %q ends in \";\", which tmux reads as a command separator; drop the trailing \";\"", ErrUnsafeArgument, a)
	}
	if strings.ContainsRune(a, 0) {
		return fmt.Errorf("%w: %q contains a NUL byte", ErrUnsafeArgument, a)
	}
	return nil
}

// run runs one tmux command (see runSeq).
func (t *Tmux) run(ctx context.Context, timeout time.Duration, args ...string) (run.Result, error) {
	return t.runSeq(ctx, timeout, args)
}

// runSeq runs one or more tmux commands as one command list, joined by the
// ";" separator, so the server executes them back to back before it
// handles any other event (such as a pane's process exiting). The commands
// must be idempotent: when the control client's answer is lost they are
// run again as a tmux process.
func (t *Tmux) runSeq(ctx context.Context, timeout time.Duration, cmds ...[]string) (run.Result, error) {
	return t.runCmds(ctx, timeout, true, cmds...)
}

// runOnce is run for a command that must not run twice (a paste, a key):
// a lost answer is an error, as a tmux process killed mid-command is.
func (t *Tmux) runOnce(ctx context.Context, timeout time.Duration, args ...string) (run.Result, error) {
	return t.runCmds(ctx, timeout, false, args)
}

func (t *Tmux) runCmds(ctx context.Context, timeout time.Duration, idempotent bool, cmds ...[]string) (run.Result, error) {
	for attempt := 1; ; attempt++ {
		res, err, done := t.viaControl(ctx, timeout, idempotent, cmds...)
		if !done {
			res, err = t.runSeqVia(ctx, timeout, nil, cmds...)
		}
		// A server that is exiting (its last session just ended) drops the
		// connection mid-command: an idempotent command asked again a
		// moment later gets a real answer (often "no server running").
		if err == nil || !idempotent || !serverExiting(err) || attempt == 4 {
			return res, err
		}
		if err := sleepCtx(ctx, t.cfg.PollInterval); err != nil {
			return res, err
		}
	}
}

// viaControl runs cmds through the control client. done is false when the
// caller should run them as a tmux process instead: no client could be
// connected, or the answer of an idempotent request was lost.
func (t *Tmux) viaControl(ctx context.Context, timeout time.Duration, idempotent bool, cmds ...[]string) (res run.Result, err error, done bool) {
	res, _, err, done = t.viaControlBlocks(ctx, timeout, idempotent, cmds...)
	return res, err, done
}

// viaControlBlocks is viaControl also returning each successful command's
// output on its own (blocks, in order; a command with no output has an
// empty one).
func (t *Tmux) viaControlBlocks(ctx context.Context, timeout time.Duration, idempotent bool, cmds ...[]string) (res run.Result, blocks [][]string, err error, done bool) {
	target := targetSession(cmds)
	cc := t.control(target)
	if cc == nil {
		return run.Result{}, nil, nil, false
	}
	res, blocks, failed, sent, err := cc.do(ctx, timeout, target, cmds)
	switch {
	case err == nil && failed:
		return res, blocks, &run.ExitError{Cmd: run.Cmd{Name: t.cfg.Binary, Args: t.argv(cmds)}, Result: res}, true
	case err == nil:
		return res, blocks, nil, true
	case errors.Is(err, ErrUnsafeArgument):
		return res, nil, err, true
	case ctx.Err() != nil:
		return res, nil, fmt.Errorf("tmux %s: %w", cmds[0][0], ctx.Err()), true
	case sent && errors.Is(err, context.DeadlineExceeded):
		return res, nil, fmt.Errorf("tmux %s after %s: %w", cmds[0][0], timeout, run.ErrTimeout), true
	case sent && !idempotent:
		return res, nil, fmt.Errorf("tmux %s: %w (it may or may not have run)", cmds[0][0], err), true
	}
	return run.Result{}, nil, nil, false
}

// targetSession is the session the first "-t" of cmds names ("" if none):
// the control client attaches there when it connects.
func targetSession(cmds [][]string) string {
	for _, c := range cmds {
		for i := 0; i+1 < len(c); i++ {
			if c[i] == "-t" {
				name := strings.TrimPrefix(c[i+1], "=")
				if j := strings.IndexByte(name, ':'); j >= 0 {
					name = name[:j]
				}
				return name
			}
		}
	}
	return ""
}

// argv is the tmux argument list running cmds as one invocation.
func (t *Tmux) argv(cmds [][]string) []string {
	full := append(make([]string, 0, 16), t.serverArgs()...)
	for i, c := range cmds {
		if i > 0 {
			full = append(full, ";")
		}
		full = append(full, c...)
	}
	return full
}

// runSeqVia runs cmds as one tmux process, its whole argv passed through
// wrap first when wrap is set (the confinement's launcher).
func (t *Tmux) runSeqVia(ctx context.Context, timeout time.Duration, wrap func([]string) ([]string, error), cmds ...[]string) (run.Result, error) {
	target := targetSession(cmds)
	if t.world != nil && target == "" {
		return run.Result{}, fmt.Errorf("tmux %s: with a server per session every command names its session", cmds[0][0])
	}
	full := append(make([]string, 0, 16), t.serverArgsFor(target)...)
	for i, c := range cmds {
		for _, a := range c {
			if err := tmuxArgSafe(a); err != nil {
				return run.Result{}, err
			}
		}
		if i > 0 {
			full = append(full, ";")
		}
		full = append(full, c...)
	}
	if wrap == nil && t.world != nil {
		wrap = func(argv []string) ([]string, error) { return t.world.Client(target, argv), nil }
	}
	if wrap == nil {
		return t.runner.Run(ctx, run.Cmd{Name: t.cfg.Binary, Args: full, Timeout: timeout})
	}
	argv, err := wrap(append([]string{t.cfg.Binary}, full...))
	if err != nil {
		return run.Result{}, err
	}
	return t.runner.Run(ctx, run.Cmd{Name: argv[0], Args: argv[1:], Timeout: timeout})
}

// sessionTarget and paneTarget are exact-match targets: "=" turns off tmux's
// prefix and pattern matching; the trailing ":" selects the session's
// current window and its active pane.
func sessionTarget(name string) string { return "=" + name }
func paneTarget(name string) string    { return "=" + name + ":" }

// saysAbsent reports whether a failed tmux call's stderr means "there is no
// such session" (or no server at all, which implies it), as opposed to a
// failure that leaves the answer open.
func saysAbsent(err error) bool {
	var ee *run.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	msg := string(ee.Result.Stderr)
	switch {
	case strings.Contains(msg, "can't find session"),
		strings.Contains(msg, "can't find window"),
		strings.Contains(msg, "can't find pane"),
		strings.Contains(msg, "no such window"),
		strings.Contains(msg, "no server running"),
		// A server with no sessions left (it exits right after its last
		// session is killed) answers any target this way.
		strings.Contains(msg, "no current target"):
		return true
	case strings.Contains(msg, "error connecting to"):
		return strings.Contains(msg, "No such file or directory") || strings.Contains(msg, "Connection refused")
	}
	return false
}

// serverExiting reports a connection the server closed mid-command.
func serverExiting(err error) bool {
	var ee *run.ExitError
	return errors.As(err, &ee) && strings.Contains(string(ee.Result.Stderr), "server exited unexpectedly")
}

// Probe reports the session's liveness. The error is nil for live, dead and
// absent; for LivenessUnknown it says why (timeout, unreadable answer,
// tmux missing) so the caller can report it.
func (t *Tmux) Probe(ctx context.Context, name string) (Liveness, error) {
	if name != SanitizeTmuxName(name) || name == "" {
		return LivenessUnknown, fmt.Errorf("%w: tmux session name %q (sanitise it with SanitizeTmuxName)", ErrInvalidName, name)
	}
	if t.world != nil && !t.worldServerUp(name) {
		return LivenessAbsent, nil
	}
	// A server that is exiting (its last session just closed) drops the
	// connection mid-command; asking again a moment later gets a real
	// answer, so only a repeated failure is unknown.
	var res run.Result
	for attempt := 1; ; attempt++ {
		var err error
		res, err = t.probeOnce(ctx, name)
		if err == nil {
			break
		}
		if saysAbsent(err) {
			return LivenessAbsent, nil
		}
		if attempt < 5 && serverExiting(err) {
			if err := sleepCtx(ctx, t.cfg.PollInterval); err != nil {
				return LivenessUnknown, err
			}
			continue
		}
		return LivenessUnknown, fmt.Errorf("probing tmux session %s: %w", name, err)
	}
	l := parsePaneDead(string(res.Stdout))
	if l == LivenessUnknown {
		return l, fmt.Errorf("listing panes of tmux session %s: no panes reported", name)
	}
	return l, nil
}

// worldServerUp reports whether name's server is there to ask: its socket
// exists and takes a connection (a stale socket — the world ended, or the
// machine rebooted — refuses it). It starts no process, so a thousand dead
// sessions cost a thousand stat calls per liveness tick. Anything else
// (a timeout, a permission error) counts as up: the probe then asks.
func (t *Tmux) worldServerUp(name string) bool {
	sock := t.world.Socket(name)
	if _, err := os.Lstat(sock); errors.Is(err, fs.ErrNotExist) {
		return false
	}
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err == nil {
		c.Close()
		return true
	}
	return !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, fs.ErrNotExist)
}

// probeOnce runs has-session, then list-panes when the session exists:
// through the control client as one command list (one round trip; tmux
// skips the rest of a list after a failing command), otherwise as two tmux
// processes.
func (t *Tmux) probeOnce(ctx context.Context, name string) (run.Result, error) {
	has := []string{"has-session", "-t", sessionTarget(name)}
	list := []string{"list-panes", "-s", "-t", sessionTarget(name), "-F", "#{pane_dead}"}
	if res, err, done := t.viaControl(ctx, t.cfg.ProbeTimeout, true, has, list); done {
		return res, err
	}
	if _, err := t.runSeqVia(ctx, t.cfg.ProbeTimeout, nil, has); err != nil {
		return run.Result{}, err
	}
	return t.runSeqVia(ctx, t.cfg.ProbeTimeout, nil, list)
}

// parsePaneDead reads `list-panes -F '#{pane_dead}'` output: every pane "1"
// means dead; any other line counts as a live pane (a line we cannot read
// must not let us kill a session); no lines at all is unknown.
func parsePaneDead(out string) Liveness {
	seen := false
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		seen = true
		if line != "1" {
			return LivenessLive
		}
	}
	if !seen {
		return LivenessUnknown
	}
	return LivenessDead
}

// SpawnSpec describes a session to start.
type SpawnSpec struct {
	// Name is the tmux session name; it must be a loop-* name.
	Name string
	// Cwd is the absolute working directory of the harness.
	Cwd string
	// Env holds KEY=VALUE pairs set in the session's environment.
	Env []string
	// Argv is the program (an absolute path is best: the tmux server's PATH
	// is the one it started with) and its arguments.
	Argv []string
	// RegistryFile is the session's registry entry, the one file under the
	// state root a confined harness may read (loop-gate needs it).
	RegistryFile string
	// OutboxDir is the session's outbox directory, the one directory under
	// loopd's state root a confined harness may write ("" for none).
	OutboxDir string
	// Harness names the harness (claude, codex, …): a world's egress
	// allows its API hosts. "" is guessed from Argv[0].
	Harness string
}

var envKeyPattern = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
var bareCommandPattern = lazyre.New(`^[A-Za-z0-9/._-]+$`)

func (s SpawnSpec) validate() error {
	if !IsLoopSessionName(s.Name) {
		return fmt.Errorf("%w: %q (spawn only loop-[A-Za-z0-9_-]+ names; build one with TmuxName)", ErrNotLoopSession, s.Name)
	}
	if !filepath.IsAbs(s.Cwd) {
		return fmt.Errorf("%w: working directory %q must be absolute", ErrInvalidName, s.Cwd)
	}
	if fi, err := os.Stat(s.Cwd); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory (prepare the workspace first)", ErrCwdMissing, s.Cwd)
	}
	for _, kv := range s.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !envKeyPattern.MatchString(k) || strings.ContainsAny(v, "\x00\n") {
			return fmt.Errorf("%w: environment entry %q must be KEY=VALUE on one line", ErrUnsafeArgument, kv)
		}
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return fmt.Errorf("%w: empty harness command", ErrUnsafeArgument)
	}
	// tmux hands a one-word command to `sh -c`; make sure that word means
	// only itself to a shell.
	if len(s.Argv) == 1 && !bareCommandPattern.MatchString(s.Argv[0]) {
		return fmt.Errorf("%w: a command without arguments (%q) is run by a shell; use a plain path", ErrUnsafeArgument, s.Argv[0])
	}
	return nil
}

// Spawn starts a detached session running s.Argv in s.Cwd. It never replaces
// a live session: a live or unknown name is refused (ErrSessionLive,
// ErrSessionUnknown); a dead one is cleared first. If tmux reports a
// duplicate anyway (a race), the name is probed again, a dead occupant is
// cleared and the spawn retried once.
func (t *Tmux) Spawn(ctx context.Context, s SpawnSpec) error {
	if err := s.validate(); err != nil {
		return err
	}
	var wrap func([]string) ([]string, error)
	if t.world != nil {
		argv, err := t.confine.Harness(s.Cwd, s.RegistryFile, s.OutboxDir, s.Argv)
		if err != nil {
			return fmt.Errorf("confining the harness of %s: %w", s.Name, err)
		}
		spec := s
		if spec.Harness == "" {
			spec.Harness = filepath.Base(s.Argv[0])
		}
		s.Argv = argv
		wrap = func(tmuxArgv []string) ([]string, error) {
			return t.world.World(spec.Name, spec.Cwd, spec.RegistryFile, spec.OutboxDir, spec.Harness, tmuxArgv)
		}
	} else if t.confine != nil {
		argv, err := t.confine.Harness(s.Cwd, s.RegistryFile, s.OutboxDir, s.Argv)
		if err != nil {
			return fmt.Errorf("confining the harness of %s: %w", s.Name, err)
		}
		s.Argv, wrap = argv, t.confine.Server
	}
	args := []string{"new-session", "-d", "-s", s.Name, "-c", s.Cwd,
		"-x", fmt.Sprint(t.cfg.Width), "-y", fmt.Sprint(t.cfg.Height)}
	for _, kv := range s.Env {
		args = append(args, "-e", kv)
	}
	args = append(args, "--")
	args = append(args, s.Argv...)
	for _, a := range args {
		if err := tmuxArgSafe(a); err != nil {
			return err
		}
	}
	// remain-on-exit is set in the same invocation: a harness that exits at
	// once (an unknown --resume id) would otherwise take its session, and
	// its last words, with it before a separate set-option arrived.
	cmds := [][]string{args}
	if t.cfg.RemainOnExit {
		cmds = append(cmds, []string{"set-option", "-w", "-t", paneTarget(s.Name), "remain-on-exit", "on"})
	}
	for attempt := 0; ; attempt++ {
		if err := t.clearForSpawn(ctx, s.Name); err != nil {
			return err
		}
		var err error
		if t.world != nil {
			err = t.runWorldSpawn(ctx, wrap, s.Name, cmds)
		} else {
			_, err = t.runSeqVia(ctx, t.cfg.CommandTimeout, wrap, cmds...)
		}
		if err == nil {
			return t.checkConfined(ctx, s.Name)
		}
		// Retry once when the name was taken under us (the next probe
		// decides what to do about the occupant) or when the server was
		// exiting as we connected.
		var ee *run.ExitError
		// A server exiting as we connect can happen more than once on a
		// busy machine (its last session's harness died at start-up).
		if attempt < 3 && serverExiting(err) || attempt == 0 && errors.As(err, &ee) && strings.Contains(string(ee.Result.Stderr), "duplicate session") {
			continue
		}
		return fmt.Errorf("spawning tmux session %s: %w", s.Name, err)
	}
}

// runWorldSpawn starts name's world with the tmux client that creates the
// session (and its server) on the world's socket running inside.
func (t *Tmux) runWorldSpawn(ctx context.Context, wrap func([]string) ([]string, error), name string, cmds [][]string) error {
	full := append(make([]string, 0, 32), t.cfg.Binary, "-S", t.world.Socket(name))
	for i, c := range cmds {
		if i > 0 {
			full = append(full, ";")
		}
		full = append(full, c...)
	}
	t.dropControl(name)
	argv, err := wrap(full)
	if err != nil {
		return err
	}
	_, err = t.runner.Run(ctx, run.Cmd{Name: argv[0], Args: argv[1:], Timeout: t.cfg.CommandTimeout})
	return err
}

// endWorld ends what is left of name's world (its server is gone or was
// just told to go) and forgets its control client.
func (t *Tmux) endWorld(name string) error {
	if t.world == nil {
		return nil
	}
	t.dropControl(name)
	return t.world.EndWorld(name)
}

// checkConfined makes sure the server that took the new session runs
// confined: a server someone started on the same socket before loopd did
// would host the agent unconfined. Such a session is killed at once.
func (t *Tmux) checkConfined(ctx context.Context, name string) error {
	if t.confine == nil || t.world != nil {
		// A world's server is confined by construction: its socket lies in
		// a directory only loopd and that world see.
		return nil
	}
	res, err := t.run(ctx, t.cfg.CommandTimeout, "display-message", "-p", "-t", paneTarget(name), "#{pid}")
	if err == nil {
		var pid int
		if pid, err = strconv.Atoi(strings.TrimSpace(string(res.Stdout))); err == nil {
			err = t.confine.CheckServer(pid)
		}
	}
	if err != nil {
		_, _ = t.run(ctx, t.cfg.CommandTimeout, "kill-session", "-t", sessionTarget(name))
		return fmt.Errorf("%w: tmux session %s: %v", ErrNotConfined, name, err)
	}
	return nil
}

// clearForSpawn makes the name free or refuses: absent is free, dead is
// killed (and must then be absent), live and unknown are refused.
func (t *Tmux) clearForSpawn(ctx context.Context, name string) error {
	l, err := t.Probe(ctx, name)
	switch l {
	case LivenessAbsent:
		// A world whose server is gone may still hold processes the agent
		// detached: they go before a new world mounts the same checkout.
		return t.endWorld(name)
	case LivenessLive:
		return fmt.Errorf("%w: tmux session %s is running; deliver into it, or close it first (`tmux kill-session -t %s`) if it is stale", ErrSessionLive, name, name)
	case LivenessDead:
		if _, err := t.run(ctx, t.cfg.CommandTimeout, "kill-session", "-t", sessionTarget(name)); err != nil && !saysAbsent(err) {
			return fmt.Errorf("%w: clearing dead tmux session %s: %v", ErrSessionOccupied, name, err)
		}
		// Killing a server's last session makes the server exit, and a probe
		// racing that exit may get no clear answer: poll briefly.
		deadline := time.Now().Add(t.cfg.ProbeTimeout)
		for {
			l, _ := t.Probe(ctx, name)
			if l == LivenessAbsent {
				return t.endWorld(name)
			}
			if l == LivenessLive || time.Now().After(deadline) {
				return fmt.Errorf("%w: dead tmux session %s is %s after kill-session; look with `tmux ls`", ErrSessionOccupied, name, l)
			}
			if err := sleepCtx(ctx, t.cfg.PollInterval); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%w: %s: %v; not spawning over it — check the tmux server, then retry", ErrSessionUnknown, name, err)
	}
}

// Kill ends a loop-* session whatever its state. It is for closing and
// cleaning up a work item at an operator's request; respawning never calls
// it (it only clears sessions that are already dead). Killing an absent
// session is not an error.
func (t *Tmux) Kill(ctx context.Context, name string) error {
	if !IsLoopSessionName(name) {
		return fmt.Errorf("%w: refusing to kill %q; theloop only kills sessions it named loop-*", ErrNotLoopSession, name)
	}
	if t.world != nil {
		if _, err := os.Stat(t.world.Socket(name)); err != nil {
			return t.endWorld(name)
		}
		defer func() { _ = t.endWorld(name) }()
	}
	_, err := t.run(ctx, t.cfg.CommandTimeout, "kill-session", "-t", sessionTarget(name))
	switch {
	case err == nil || saysAbsent(err):
		return nil
	case serverExiting(err):
		// The server was exiting (its last other session just ended) while
		// it took the command: whether our session went with it is only
		// known by asking again. Probe retries the same race; once the
		// name is absent the kill has happened, whoever did it.
		return t.killAfterServerExit(ctx, name, err)
	}
	return fmt.Errorf("killing tmux session %s: %w", name, err)
}

// killAfterServerExit settles a kill-session that met an exiting server:
// it polls until the session is absent (done) or answers live again (the
// kill is retried), for at most ProbeTimeout.
func (t *Tmux) killAfterServerExit(ctx context.Context, name string, first error) error {
	deadline := time.Now().Add(t.cfg.ProbeTimeout)
	for {
		l, _ := t.Probe(ctx, name)
		switch l {
		case LivenessAbsent:
			return nil
		case LivenessLive, LivenessDead:
			if _, err := t.run(ctx, t.cfg.CommandTimeout, "kill-session", "-t", sessionTarget(name)); err == nil || saysAbsent(err) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("killing tmux session %s: %w (and it is %s after %s)", name, first, l, t.cfg.ProbeTimeout)
		}
		if err := sleepCtx(ctx, t.cfg.PollInterval); err != nil {
			return err
		}
	}
}

// Terminated says what TerminateHarness did.
type Terminated struct {
	// Signalled counts the live panes whose process group was sent SIGTERM.
	Signalled int
	// Killed counts the panes still alive after the grace period and sent
	// SIGKILL.
	Killed int
}

// TerminateHarness ends the harness in every pane of a loop-* session and
// keeps the session, so its last screen stays readable for a post-mortem
// (routing.tmux.killHarnessOnClose). remain-on-exit is turned on first (so
// the pane outlives its process), each live pane's process group gets
// SIGTERM, the panes are polled until dead for grace, and whatever is still
// alive then gets SIGKILL. An absent session is not an error. Only the
// process groups tmux reports for the session's own panes are signalled.
func (t *Tmux) TerminateHarness(ctx context.Context, name string, grace time.Duration) (Terminated, error) {
	var out Terminated
	if !IsLoopSessionName(name) {
		return out, fmt.Errorf("%w: refusing to signal %q; theloop only signals sessions it named loop-*", ErrNotLoopSession, name)
	}
	if _, err := t.run(ctx, t.cfg.CommandTimeout, "set-option", "-w", "-t", paneTarget(name), "remain-on-exit", "on"); err != nil {
		if saysAbsent(err) {
			return out, nil
		}
		return out, fmt.Errorf("keeping tmux session %s open: %w", name, err)
	}
	pids, err := t.livePanePIDs(ctx, name)
	if err != nil {
		return out, err
	}
	for _, pid := range pids {
		if t.signalPane(ctx, name, pid, syscall.SIGTERM) == nil {
			out.Signalled++
		}
	}
	deadline := time.Now().Add(grace)
	for len(pids) > 0 && time.Now().Before(deadline) {
		if err := sleepCtx(ctx, t.cfg.PollInterval); err != nil {
			return out, err
		}
		if pids, err = t.livePanePIDs(ctx, name); err != nil {
			return out, err
		}
	}
	for _, pid := range pids {
		if t.signalPane(ctx, name, pid, syscall.SIGKILL) == nil {
			out.Killed++
		}
	}
	// tmux notices a killed pane's exit a moment later: wait for it
	// (bounded), so a probe right after this sees the pane dead.
	deadline = time.Now().Add(killSettle)
	for out.Killed > 0 && len(pids) > 0 && time.Now().Before(deadline) {
		if err := sleepCtx(ctx, min(t.cfg.PollInterval, 10*time.Millisecond)); err != nil {
			return out, err
		}
		if pids, err = t.livePanePIDs(ctx, name); err != nil {
			return out, err
		}
	}
	return out, nil
}

// killSettle bounds TerminateHarness's wait for tmux to see the panes it
// killed as dead.
const killSettle = 2 * time.Second

// livePanePIDs lists the pids of the session's panes whose process runs.
func (t *Tmux) livePanePIDs(ctx context.Context, name string) ([]int, error) {
	res, err := t.run(ctx, t.cfg.ProbeTimeout, "list-panes", "-s", "-t", sessionTarget(name), "-F", "#{pane_pid} #{pane_dead}")
	if err != nil {
		if saysAbsent(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing panes of tmux session %s: %w", name, err)
	}
	var pids []int
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || f[1] == "1" {
			continue
		}
		if pid, err := strconv.Atoi(f[0]); err == nil && pid > 1 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// signalPane signals a pane's process group. In a world, pane pids are the
// world's (its own PID namespace): the signal is sent from inside, by the
// world's server (run-shell runs there), never by pid from the host.
func (t *Tmux) signalPane(ctx context.Context, name string, pid int, sig syscall.Signal) error {
	if t.world == nil {
		return signalGroup(pid, sig)
	}
	n := strconv.Itoa(int(sig))
	p := strconv.Itoa(pid)
	_, err := t.run(ctx, t.cfg.CommandTimeout, "run-shell", "-t", paneTarget(name), "kill -"+n+" -- -"+p+" 2>/dev/null || kill -"+n+" "+p)
	return err
}

// signalGroup signals the process group a pane's process leads (tmux
// starts each pane's process in its own session), so the harness's own
// children go too; it falls back to the process alone.
func signalGroup(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pid, sig); err == nil {
		return nil
	}
	return syscall.Kill(pid, sig)
}

// Capture returns the text of the session's active pane, scrollback
// included, with wrapped lines joined.
func (t *Tmux) Capture(ctx context.Context, name string) (string, error) {
	if !IsLoopSessionName(name) {
		return "", fmt.Errorf("%w: %q", ErrNotLoopSession, name)
	}
	res, err := t.run(ctx, t.cfg.CommandTimeout, "capture-pane", "-p", "-J", "-S", "-", "-t", paneTarget(name))
	if err != nil {
		if saysAbsent(err) {
			return "", fmt.Errorf("%w: tmux session %s is absent", ErrSessionMissing, name)
		}
		return "", fmt.Errorf("capturing tmux session %s: %w", name, err)
	}
	return string(res.Stdout), nil
}

// WaitReady waits until a freshly started harness has drawn a non-empty
// screen that stays unchanged for ReadySettle, so a paste lands in its
// input instead of racing its start-up. A pane whose process exits meanwhile
// is ErrSessionMissing; no steady screen within ReadyTimeout is ErrNotReady.
func (t *Tmux) WaitReady(ctx context.Context, name string) error {
	deadline := time.Now().Add(t.cfg.ReadyTimeout)
	var last string
	since := time.Now()
	for {
		screen, err := t.Capture(ctx, name)
		if err != nil {
			return err
		}
		now := time.Now()
		if screen != last {
			last, since = screen, now
		} else if now.Sub(since) >= t.cfg.ReadySettle {
			// Steady: check the process, whether or not anything is drawn
			// (a dead pane does not always show tmux's "Pane is dead").
			switch l, err := t.Probe(ctx, name); l {
			case LivenessLive:
				if strings.TrimSpace(screen) != "" {
					return nil
				}
				since = now // alive but blank: keep waiting
			case LivenessDead, LivenessAbsent:
				return fmt.Errorf("%w: the harness in %s exited during start-up; its last screen:\n%s", ErrSessionMissing, name, lastLines(screen, 10))
			default:
				return fmt.Errorf("%w: %s: %v", ErrSessionUnknown, name, err)
			}
		}
		if now.After(deadline) {
			return fmt.Errorf("%w: %s showed no steady screen within %s; attach with `tmux attach -t %s` to see what it is waiting for", ErrNotReady, name, t.cfg.ReadyTimeout, name)
		}
		if err := sleepCtx(ctx, t.cfg.PollInterval); err != nil {
			return err
		}
	}
}

// Receipt is the evidence that a delivery reached the pane.
type Receipt struct {
	// Session is the tmux session delivered into.
	Session string
	// Bytes is the size of the text pasted (after sanitising).
	Bytes int
	// Seen: the tail of the pasted text appeared in the pane once more than
	// it did before the paste. This is the strong signal.
	Seen bool
	// Changed: the pane's content changed after the paste. Weaker (a TUI may
	// show a large paste as a placeholder, or redraw for other reasons), but
	// proof the pane is taking input.
	Changed bool
	// Submitted: the submit key was sent after the paste was confirmed.
	Submitted bool
	// Confirmed is how long after the paste the pane showed it.
	Confirmed time.Duration
}

// Verified reports whether the pane demonstrably took the text and it was
// submitted.
func (r Receipt) Verified() bool { return r.Submitted && (r.Seen || r.Changed) }

// Deliver pastes text into the session and submits it: the text goes through
// a private temporary file into a uniquely named tmux buffer (so concurrent
// deliveries to different sessions cannot swap buffers), is pasted
// bracketed so newlines do not submit early, and only once the pane shows it
// is a separate Enter sent. Control characters other than newline and tab
// are removed first, so pasted text cannot end the bracketed paste and type
// keys of its own.
//
// Deliver does not submit if the pane never showed the text
// (ErrNotReceived, or ErrSessionMissing if the harness is gone); the
// returned Receipt says what was observed either way.
func (t *Tmux) Deliver(ctx context.Context, name, text string) (Receipt, error) {
	return t.DeliverWith(ctx, name, text, 0)
}

// DeliverWith is Deliver with a pause between the pasted text showing on
// the screen and the Enter that submits it (Submitter).
func (t *Tmux) DeliverWith(ctx context.Context, name, text string, submitGap time.Duration) (Receipt, error) {
	r := Receipt{Session: name}
	if !IsLoopSessionName(name) {
		return r, fmt.Errorf("%w: refusing to paste into %q", ErrNotLoopSession, name)
	}
	clean := SanitizePaste(text)
	if clean == "" {
		return r, fmt.Errorf("%w: nothing to paste into %s", ErrEmptyDelivery, name)
	}
	r.Bytes = len(clean)
	cands := receiptCandidates(clean)
	var nonce [6]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return r, err
	}
	buf := "theloop-" + hex.EncodeToString(nonce[:])
	// tmux 3.3 crashes — every session on the server with it — when
	// paste-buffer targets a dead pane. The check and the paste therefore
	// run inside the server as one command (if-shell -F evaluates the
	// format without a shell), leaving no gap for the harness to die in.
	// Only validated names go into the command strings.
	target := paneTarget(name)
	guard := []string{"if-shell", "-F", "-t", target, "#{pane_dead}",
		"display-message -p " + paneDeadMarker, "paste-buffer -p -d -b " + buf + " -t " + target}
	pasted := time.Now()
	before, dead, err, done := t.captureAndPaste(ctx, name, buf, clean, guard)
	if !done {
		// As tmux processes: the capture, then the load and the guard.
		if before, err = t.captureReceipt(ctx, name); err != nil {
			return r, err
		}
		pasted = time.Now()
		var res run.Result
		res, err = t.loadAndPaste(ctx, buf, clean, guard)
		if errors.Is(err, errPasteFile) {
			return r, fmt.Errorf("delivering to %s: %w", name, err)
		}
		dead = err == nil && strings.Contains(string(res.Stdout), paneDeadMarker)
	}
	if err != nil || dead {
		_, _ = t.run(ctx, t.cfg.CommandTimeout, "delete-buffer", "-b", buf)
		if dead || saysAbsent(err) {
			return r, fmt.Errorf("%w: the harness in %s is gone; respawn it", ErrSessionMissing, name)
		}
		return r, fmt.Errorf("pasting into %s: %w", name, err)
	}
	frag, seenBefore := pickReceiptFragment(cands, squashSpace(before))

	deadline := pasted.Add(t.cfg.ReceiptTimeout)
	var changedAt time.Time
	// Through the control client a capture is cheap: look again soon
	// (1, 2, 4 … ms up to PollInterval), since the pane usually shows the
	// text within a few milliseconds.
	wait := t.cfg.PollInterval
	if t.ctl != nil {
		wait = min(time.Millisecond, wait)
	}
	var live Liveness // from the last capture, when it came with a probe
	for {
		var screen string
		var err error
		screen, live, err = t.captureProbed(ctx, name)
		if err != nil {
			return r, err
		}
		if strings.Count(squashSpace(screen), frag) > seenBefore {
			r.Seen = true
			r.Confirmed = time.Since(pasted)
			break
		}
		now := time.Now()
		if !r.Changed && screen != before {
			r.Changed, changedAt = true, now
			r.Confirmed = now.Sub(pasted)
		}
		// A changed screen that never shows the text (a TUI placeholder for
		// a long paste) is accepted after one settle period.
		if r.Changed && now.Sub(changedAt) >= t.cfg.ReadySettle || now.After(deadline) {
			break
		}
		if err := sleepCtx(ctx, wait); err != nil {
			return r, err
		}
		wait = min(2*wait, t.cfg.PollInterval)
	}
	// A pane that changed because its harness died is no receipt: check the
	// process before submitting (and so before claiming Submitted) — with
	// the last capture when it came with a probe, else now.
	if live == LivenessUnknown {
		live, _ = t.Probe(ctx, name)
	}
	if live == LivenessDead || live == LivenessAbsent {
		return r, fmt.Errorf("%w: the harness in %s is %s; respawn it", ErrSessionMissing, name, live)
	}
	if !r.Seen && !r.Changed {
		return r, fmt.Errorf("%w: %s showed no sign of the pasted text within %s; attach with `tmux attach -t %s` to look (text left unsubmitted)", ErrNotReceived, name, t.cfg.ReceiptTimeout, name)
	}
	if submitGap > 0 {
		if err := sleepCtx(ctx, submitGap); err != nil {
			return r, err
		}
	}
	if _, err := t.runOnce(ctx, t.cfg.CommandTimeout, "send-keys", "-t", paneTarget(name), "Enter"); err != nil {
		return r, fmt.Errorf("submitting to %s: %w", name, err)
	}
	r.Submitted = true
	return r, nil
}

// captureAndPaste is, through the control client, one command list: the
// pane's receipt capture (the "before" of the receipt, taken right before the
// paste), the buffer load and the paste guard. done is false when the
// client is not available (nothing ran): the caller runs them as tmux
// processes. dead reports the guard found the pane dead; it is read only
// from the answers after the capture's, which the pane cannot write.
func (t *Tmux) captureAndPaste(ctx context.Context, name, buf, text string, guard []string) (before string, dead bool, err error, done bool) {
	if len(text) > maxControlPaste {
		return "", false, nil, false
	}
	_, blocks, err, done := t.viaControlBlocks(ctx, t.cfg.CommandTimeout, false,
		receiptCapture(name),
		[]string{"set-buffer", "-b", buf, "--", text}, guard)
	if !done || err != nil {
		return "", false, err, done
	}
	if len(blocks) < 3 {
		return "", false, fmt.Errorf("tmux answered %d of the capture, load and paste", len(blocks)), true
	}
	for _, b := range blocks[1:] {
		for _, l := range b {
			if strings.Contains(l, paneDeadMarker) {
				dead = true
			}
		}
	}
	return string(joinLines(blocks[0])), dead, nil, true
}

// receiptHistory is how many lines of scrollback above the visible screen
// a receipt's captures hold. A whole scrollback is up to history-limit
// (2000) lines: ~150 KB per capture, which cost the tmux server and loopd
// ~10 ms each on a loaded 2-core machine, twice per delivery — the largest
// single step of a webhook's way into the pane (README, Performance).
//
// A bounded window keeps the receipt sound. Every capture of a delivery
// takes the same window (the last receiptHistory lines of history plus the
// screen), and a pane's text only moves up: the window after the paste is
// the window before it, less its top lines, plus whatever the pane printed
// since. A fragment counted more often afterwards than before was therefore
// printed since — as with the whole scrollback. What the window can add is
// a false negative: when every candidate is already in the window (the same
// text pasted again), an old copy leaving its top as the new one arrives
// keeps the count still, and the receipt falls back to the changed screen
// and its settle period, as the whole scrollback did once it was full.
const receiptHistory = 200

// receiptCapture is the capture-pane command of a receipt (receiptHistory).
func receiptCapture(name string) []string {
	return []string{"capture-pane", "-p", "-J", "-S", "-" + strconv.Itoa(receiptHistory), "-t", paneTarget(name)}
}

// captureReceipt is receiptCapture as a tmux process (without the control
// client), with Capture's errors.
func (t *Tmux) captureReceipt(ctx context.Context, name string) (string, error) {
	res, err := t.run(ctx, t.cfg.CommandTimeout, receiptCapture(name)...)
	if err != nil {
		if saysAbsent(err) {
			return "", fmt.Errorf("%w: tmux session %s is absent", ErrSessionMissing, name)
		}
		return "", fmt.Errorf("capturing tmux session %s: %w", name, err)
	}
	return string(res.Stdout), nil
}

// captureProbed is captureReceipt, through the control client together
// with the probe's has-session and list-panes (one round trip): live is the
// session's liveness at the capture, LivenessUnknown when not probed.
func (t *Tmux) captureProbed(ctx context.Context, name string) (screen string, live Liveness, err error) {
	_, blocks, err, done := t.viaControlBlocks(ctx, t.cfg.CommandTimeout, true,
		receiptCapture(name),
		[]string{"has-session", "-t", sessionTarget(name)},
		[]string{"list-panes", "-s", "-t", sessionTarget(name), "-F", "#{pane_dead}"})
	if !done {
		screen, err = t.captureReceipt(ctx, name)
		return screen, LivenessUnknown, err
	}
	if err != nil {
		if saysAbsent(err) {
			return "", LivenessAbsent, fmt.Errorf("%w: tmux session %s is absent", ErrSessionMissing, name)
		}
		return "", LivenessUnknown, fmt.Errorf("capturing tmux session %s: %w", name, err)
	}
	if len(blocks) != 3 {
		return "", LivenessUnknown, fmt.Errorf("capturing tmux session %s: %d answers to 3 commands", name, len(blocks))
	}
	return string(joinLines(blocks[0])), parsePaneDead(strings.Join(blocks[2], "\n")), nil
}

// maxControlPaste bounds the text loadAndPaste sends through the control
// client; a larger one goes through a file.
const maxControlPaste = 1 << 20

// errPasteFile: the paste file could not be written.
var errPasteFile = errors.New("paste file")

// loadAndPaste puts text into the named buffer and runs the paste guard
// after it. Through the control client both go as one command list (one
// round trip), the text as set-buffer's quoted argument on the client's
// standard input — never an argv, so it is in no process's command line —
// and are not run again after a lost answer (the paste must not happen
// twice). Otherwise the text goes through a private temporary file that a
// tmux process loads (the confined server could not read loopd's
// temporary directory, so the file is only ever read by a client), then a
// second process runs the guard.
func (t *Tmux) loadAndPaste(ctx context.Context, buf, text string, guard []string) (run.Result, error) {
	if len(text) <= maxControlPaste {
		if res, err, done := t.viaControl(ctx, t.cfg.CommandTimeout, false, []string{"set-buffer", "-b", buf, "--", text}, guard); done {
			return res, err
		}
	}
	f, err := os.CreateTemp(t.cfg.TempDir, "theloop-paste-*")
	if err != nil {
		return run.Result{}, fmt.Errorf("%w: creating it: %w", errPasteFile, err)
	}
	defer os.Remove(f.Name())
	_, werr := f.WriteString(text)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return run.Result{}, fmt.Errorf("%w: writing it: %w", errPasteFile, werr)
	}
	if _, err := t.runSeqVia(ctx, t.cfg.CommandTimeout, nil, []string{"load-buffer", "-b", buf, f.Name()}); err != nil {
		return run.Result{}, fmt.Errorf("loading paste buffer: %w", err)
	}
	return t.runSeqVia(ctx, t.cfg.CommandTimeout, nil, guard)
}

// paneDeadMarker is what the paste guard prints when the pane is dead.
const paneDeadMarker = "theloop-pane-dead"

// SanitizePaste prepares text for pasting into a terminal: line endings
// become "\n", invalid UTF-8 becomes U+FFFD, and every control character
// other than "\n" and "\t" (ESC above all, which could end a bracketed paste
// and smuggle keystrokes) is dropped. Trailing whitespace is trimmed, since
// submitting is the runner's job, not the text's.
func SanitizePaste(text string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	text = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || !unicode.IsControl(r) {
			return r
		}
		return -1
	}, text)
	return strings.TrimRightFunc(text, unicode.IsSpace)
}

// receiptFragment is what Deliver looks for on screen: the last up-to-24
// characters of the text's last line, with whitespace runs squashed (the
// terminal renders tabs and wraps as spaces).
func receiptFragment(clean string) string {
	line := clean[strings.LastIndexByte(clean, '\n')+1:]
	line = squashSpace(line)
	if utf8.RuneCountInString(line) > 24 {
		r := []rune(line)
		line = strings.TrimSpace(string(r[len(r)-24:]))
	}
	return line
}

// receiptCandidates are the fragments a receipt may look for: the last
// line's (receiptFragment), then those of the lines before it, up to
// maxReceiptLines from the end (what a harness's input box still shows),
// distinct and non-empty.
func receiptCandidates(clean string) []string {
	var out []string
	rest := clean
	for len(out) < maxReceiptLines && rest != "" {
		i := strings.LastIndexByte(rest, '\n')
		if f := receiptFragment(rest[i+1:]); f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
		if i < 0 {
			break
		}
		rest = rest[:i]
	}
	return out
}

const maxReceiptLines = 8

// pickReceiptFragment chooses the candidate the pane's receipt capture
// (receiptHistory, squashed) does not hold yet, so that its first
// appearance is the receipt: the same
// footer on every prompt is counted instead, and once the scrollback is
// full tmux trims old copies from its top as the new one arrives — the
// count does not rise, and every delivery waited out the settle period.
// With none absent, the last line's and its count, as before.
func pickReceiptFragment(cands []string, squashed string) (string, int) {
	for _, c := range cands {
		if !strings.Contains(squashed, c) {
			return c, 0
		}
	}
	if len(cands) == 0 {
		return "", 0
	}
	return cands[0], strings.Count(squashed, cands[0])
}

// squashSpace is strings.Join(strings.Fields(s), " ") in one pass and one
// allocation: Deliver squashes every capture of its receipt.
func squashSpace(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	gap := false
	for i := 0; i < len(s); {
		c, size := s[i], 1
		var space bool
		if c < utf8.RuneSelf {
			space = c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
		} else {
			var r rune
			r, size = utf8.DecodeRuneInString(s[i:])
			space = unicode.IsSpace(r)
		}
		if space {
			gap = b.Len() > 0
		} else {
			if gap {
				b.WriteByte(' ')
				gap = false
			}
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// lastLines returns the last n non-blank lines of a screen capture.
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
