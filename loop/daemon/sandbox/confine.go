package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Confiner confines the sessions one loopd hosts. Its methods are the
// sessions.Confinement seam (the daemon passes a *Confiner to
// sessions.NewConfinedTmux; this package does not import sessions).
type Confiner struct {
	// Self is the launcher: loopd's executable (os.Executable()), or a test
	// binary whose TestMain calls MaybeRunLauncher.
	Self string
	// StateRoot is loopd's state root; only its session registry is
	// readable inside the sandbox.
	StateRoot string
	// RegistryDir is the session registry (<state root>/sessions).
	RegistryDir string
	// OutboxRoot holds the sessions' outboxes (<state root>/outbox); ""
	// when the daemon keeps none. The tmux server's layer may write it,
	// each pane only its own session's directory below it.
	OutboxRoot string
	// WorkspaceRoot holds every session's worktree: the tmux server's
	// read-write directory (the union of its panes').
	WorkspaceRoot string
	// Home is the user's home directory ("" = os.UserHomeDir()).
	Home string
	// TempDir is the agents' temporary directory ("" =
	// <os.TempDir()>/theloop-agent-<uid>, created 0700).
	TempDir string
	// TmuxDir is the tmux socket directory ("" = $TMUX_TMPDIR or /tmp,
	// then tmux-<uid>, as tmux itself computes it).
	TmuxDir string
	// Executables are programs the agent runs besides the system's: the
	// harness, loopctl, loop-gate (their directories become read+execute).
	Executables []string
	// Writable are further directories the agent may write (an embedder's
	// harness keeping its state outside the home directory).
	Writable []string
	// AgentEnv is routing.agentEnv: variables kept beside BaseEnv.
	AgentEnv []string
	// Off is routing.sandbox: off: no Landlock, the environment is still
	// filtered and every agent process still descends from a launcher.
	Off bool
	// ProcRoot is "/proc" unless a test says otherwise.
	ProcRoot string
}

// Prepare fills the defaults and creates the temp and tmux socket
// directories (Landlock can only grant paths that exist). It refuses a
// confinement that would hand the agent the state root.
func (c *Confiner) Prepare() error {
	if err := c.defaults(); err != nil {
		return err
	}
	for _, d := range []string{c.TempDir, c.TmuxDir, c.RegistryDir, c.OutboxRoot} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	if err := c.serverPolicy().Validate(); err != nil {
		return err
	}
	if !c.Off && !Available() {
		return ErrNoLandlock
	}
	return nil
}

// defaults fills the unset paths and checks the required ones.
func (c *Confiner) defaults() error {
	if c.Self == "" || !filepath.IsAbs(c.Self) {
		return fmt.Errorf("sandbox: the launcher %q must be an absolute path", c.Self)
	}
	if c.StateRoot == "" || c.WorkspaceRoot == "" {
		return errors.New("sandbox: StateRoot and WorkspaceRoot are required")
	}
	if c.RegistryDir == "" {
		c.RegistryDir = filepath.Join(c.StateRoot, "sessions")
	}
	if c.Home == "" {
		c.Home, _ = os.UserHomeDir()
	}
	if c.TempDir == "" {
		c.TempDir = filepath.Join(os.TempDir(), fmt.Sprintf("theloop-agent-%d", os.Getuid()))
	}
	if c.TmuxDir == "" {
		base := os.Getenv("TMUX_TMPDIR")
		if base == "" {
			base = "/tmp"
		}
		c.TmuxDir = filepath.Join(base, fmt.Sprintf("tmux-%d", os.Getuid()))
	}
	if c.ProcRoot == "" {
		c.ProcRoot = "/proc"
	}
	return nil
}

func (c *Confiner) base(worktree string) PolicyOptions {
	return PolicyOptions{
		Worktree: worktree, StateRoot: c.StateRoot, Home: c.Home, TempDir: c.TempDir,
		Executables: c.Executables, Self: c.Self, Off: c.Off,
	}
}

// serverPolicy is the tmux server's layer: the union of its panes'.
func (c *Confiner) serverPolicy() Policy {
	o := c.base(c.WorkspaceRoot)
	o.RegistryDir, o.TmuxDir, o.OutboxDir = c.RegistryDir, c.TmuxDir, c.OutboxRoot
	o.Env = append([]string{}, c.AgentEnv...)
	p := NewPolicy(o)
	p.ReadWrite = append(p.ReadWrite, c.Writable...)
	return p
}

// Server implements sessions.Confinement: the tmux client that may start
// the server runs through a detached launcher with the server's policy.
func (c *Confiner) Server(tmuxArgv []string) ([]string, error) {
	return DetachedCommand(c.Self, c.serverPolicy(), tmuxArgv)
}

// PaneEnv are the variables tmux sets in every pane (which server, which
// pane): no secret, and what a program in the pane needs to talk to tmux.
var PaneEnv = []string{"TMUX", "TMUX_PANE"}

// Harness implements sessions.Confinement: a pane's command runs through a
// foreground launcher with the session's narrower policy (its worktree,
// its registry entry, its outbox), stacked on the server's. An outbox
// outside OutboxRoot is refused: the server's layer could not grant it.
func (c *Confiner) Harness(cwd, registryFile, outboxDir string, argv []string) ([]string, error) {
	if outboxDir != "" && (c.OutboxRoot == "" || !within(outboxDir, c.OutboxRoot) || outboxDir == c.OutboxRoot) {
		return nil, fmt.Errorf("sandbox: the session outbox %s is not a directory below the outbox root %q", outboxDir, c.OutboxRoot)
	}
	o := c.base(cwd)
	o.RegistryFile, o.OutboxDir = registryFile, outboxDir
	// The pane's environment comes from the server's filtered one plus
	// tmux -e; the harness's launcher filters it once more (the session's
	// variables and routing.agentEnv besides BaseEnv), so a harness never
	// depends on how its pane was started.
	o.Env = append(append(append([]string{}, SessionEnv...), PaneEnv...), c.AgentEnv...)
	p := NewPolicy(o)
	p.ReadWrite = append(p.ReadWrite, c.Writable...)
	return Command(c.Self, p, argv)
}

// CheckServer implements sessions.Confinement.
func (c *Confiner) CheckServer(pid int) error {
	in, err := InSandbox(c.ProcRoot, pid)
	if err != nil {
		return err
	}
	if !in {
		return fmt.Errorf("the tmux server (pid %s) was not started by loopd's sandbox launcher", strconv.Itoa(pid))
	}
	return nil
}
