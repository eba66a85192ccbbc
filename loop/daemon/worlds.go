package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/dispatch"
	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
	"github.com/theloop-dev/theloop/sessions"
)

// agentWorlds is where loopd's agent sessions run: loopd's own tmux
// server, and the sandbox every session goes through (a world per session,
// docs/decisions.md §18 and 22) — as the settings say (routing.tmux,
// routing.sandbox: all need a restart).
type agentWorlds struct {
	cfg     *Config
	harness *harnesses
	logf    func(format string, args ...any)
	// egress is the worlds' proxy, once confinement made it (nil without
	// worlds).
	egress *sandbox.Egress
}

// warnSpawn logs the warning a degraded sandbox gives on every spawn.
func (d *agentWorlds) warnSpawn(cwd string) {
	d.logf("warning: %s; spawning in %s", d.undefendedWarning(), cwd)
}

// tmuxEnviron is the environment of loopd's tmux clients, and so of the
// tmux server the first of them starts, whose environment every pane's
// launcher inherits: the allowlist (sandbox.ChildEnv) plus routing.agentEnv,
// the variables the operator asked the harness to keep — the launcher
// filters them again for the harness. Every other program loopd runs gets
// run's default allowlist and what its caller names.
func (d *agentWorlds) tmuxEnviron() []string {
	return sandbox.ChildEnv(os.Environ(), d.cfg.Routing.AgentEnv)
}

// tmuxConfig is the configured tmux runner's, on a server of loopd's own:
// the operator's default server was not started confined, so agents are
// never hosted there (attach with `tmux -L theloop-<hash> attach`, as the
// announcement says).
func (d *agentWorlds) tmuxConfig() sessions.TmuxConfig {
	tc := d.cfg.Tmux
	if tc.Socket == "" && tc.SocketPath == "" {
		sum := sha256.Sum256([]byte(d.cfg.StateRoot))
		tc.Socket = "theloop-" + hex.EncodeToString(sum[:4])
	}
	return tc
}

// confinement is the sandbox every session goes through (docs/decisions.md §18).
// Without Landlock, and without routing.sandbox: off, it refuses every
// spawn with an error that names the key; with off it warns on every one.
func (d *agentWorlds) confinement() sessions.Confinement {
	self := d.cfg.Launcher
	if self == "" {
		exe, err := os.Executable()
		if err != nil {
			return refusedConfinement{fmt.Errorf("daemon: finding loopd's executable for the sandbox launcher: %w", err)}
		}
		self = exe
	}
	ws := d.cfg.Routing.WorkspaceRoot
	if ws == "" {
		ws = d.cfg.Routing.SpawnWorkdir
	}
	if abs, err := filepath.Abs(ws); err == nil {
		ws = abs
	}
	exes := d.harness.executables()
	for _, name := range []string{"loopctl", "loop-gate"} {
		if p, err := d.harness.path.lookPath(name); err == nil {
			exes = append(exes, p)
		}
	}
	c := &sandbox.Confiner{Self: self, StateRoot: d.cfg.StateRoot, RegistryDir: sessions.RegistryDir(d.cfg.StateRoot),
		OutboxRoot:    loop.OutboxRoot(d.cfg.StateRoot),
		WorkspaceRoot: ws, Executables: exes, Writable: d.cfg.SandboxWritable, AgentEnv: d.cfg.Routing.AgentEnv, Off: d.cfg.SandboxOff()}
	if sp := d.cfg.Tmux.SocketPath; sp != "" {
		// routing.tmux.socketPath: the server creates its socket there, so
		// that directory (not tmux's default one) is the server's to write.
		c.TmuxDir = filepath.Dir(sp)
	}
	if !d.cfg.SandboxOff() && !d.cfg.SandboxLandlock() {
		// Decision 22: a world per session.
		wd := &sandbox.Worlds{Confiner: c, Root: d.worldsRoot(), AllowHosts: d.cfg.Routing.SandboxAllowHosts,
			HostNetwork: d.cfg.SandboxHostNetwork(), ClientPaths: []string{pasteDir(d.tmuxConfig())},
			Egress: &sandbox.Egress{Log: func(world, host string, port int, allowed bool) {
				if !allowed {
					d.logf("warning: sandbox egress refused %s:%d for %s (allow it with routing.sandbox.allowHosts)", host, port, world)
				}
			}}}
		if err := wd.Prepare(); err != nil {
			return refusedConfinement{fmt.Errorf("daemon: refusing to spawn an agent session: %w", err)}
		}
		d.egress = wd.Egress
		if d.cfg.SandboxHostNetwork() {
			return warnedWorlds{Worlds: wd, warn: d.warnSpawn}
		}
		return wd
	}
	if err := c.Prepare(); err != nil {
		if errors.Is(err, sandbox.ErrNoLandlock) {
			err = fmt.Errorf("daemon: refusing to spawn an agent session: %w", err)
		}
		return refusedConfinement{err}
	}
	return warnedConfinement{Confiner: c, warn: d.warnSpawn}
}

// resumeWorlds serves the egress proxy again for every session whose world
// outlived the previous loopd (a restart keeps sessions; the worlds' keepers
// dial the proxy's socket per connection).
func (d *agentWorlds) resumeWorlds(tm *sessions.Tmux, reg *sessions.Registry) {
	wd, ok := tm.Confinement().(interface {
		ResumeEgress(name, harness string) error
	})
	if !ok {
		return
	}
	recs, _ := reg.List()
	for _, rec := range recs {
		if rec.TmuxName == "" {
			continue
		}
		if err := wd.ResumeEgress(rec.TmuxName, rec.Harness); err != nil {
			d.logf("warning: the egress proxy of session %s: %v", rec.TmuxName, err)
		}
	}
}

// worldsRoot holds the sessions' worlds: short (tmux sockets live there),
// outside the state root's protected tree and the workspaces.
func (d *agentWorlds) worldsRoot() string {
	// Under the state root when its socket paths stay short (a world sees
	// only what is mounted into it, so the rest of the state root is not
	// there); else a short directory of the temp dir.
	if in := filepath.Join(d.cfg.StateRoot, "worlds"); filepath.IsAbs(in) && len(in)+len("/0123456789ab/tmux/s") < 100 {
		return in
	}
	sum := sha256.Sum256([]byte(d.cfg.StateRoot))
	tmp := os.TempDir()
	if len(tmp)+len("/theloop-w-0000000-01234567/0123456789ab/tmux/s") >= 100 {
		tmp = "/tmp" // a long $TMPDIR (macOS gives one of ~50 characters)
	}
	return filepath.Join(tmp, fmt.Sprintf("theloop-w-%d-%s", os.Getuid(), hex.EncodeToString(sum[:4])))
}

// undefendedWarning is what status and the dashboard say while agents run
// without the namespace sandbox ("" when every session has a world).
func (d *agentWorlds) undefendedWarning() string {
	switch {
	case d.cfg.SandboxOff():
		return "routing.sandbox: off — agent sessions run without any sandbox: gates are not defended (the agent can read loopd's keys and state)"
	case d.cfg.SandboxLandlock():
		return "routing.sandbox: landlock — degraded: agent sessions run under Landlock over loopd's own world (one user, file system, tmux server and network), not in a namespace sandbox of their own"
	case d.cfg.SandboxHostNetwork():
		return "routing.sandbox.network: host — degraded: agent sessions share the host's network and reach every service on 127.0.0.1"
	}
	return ""
}

// refusedConfinement refuses every spawn with why — permanently: without
// the sandbox a retry meets the same refusal until the operator installs
// it or chooses routing.sandbox, so the event is dead-lettered at once
// (dispatch.Permanent).
type refusedConfinement struct{ err error }

func (r refusedConfinement) refusal() error { return dispatch.Permanent(r.err) }

func (r refusedConfinement) Server([]string) ([]string, error) { return nil, r.refusal() }
func (r refusedConfinement) Harness(string, string, string, []string) ([]string, error) {
	return nil, r.refusal()
}
func (r refusedConfinement) CheckServer(int) error { return r.refusal() }

// warnedConfinement logs a warning on every spawn (routing.sandbox: off).
type warnedConfinement struct {
	*sandbox.Confiner
	warn func(cwd string)
}

func (w warnedConfinement) Harness(cwd, registryFile, outboxDir string, argv []string) ([]string, error) {
	w.warn(cwd)
	return w.Confiner.Harness(cwd, registryFile, outboxDir, argv)
}

// warnedWorlds logs a warning on every spawn (routing.sandbox.network: host).
type warnedWorlds struct {
	*sandbox.Worlds
	warn func(cwd string)
}

func (w warnedWorlds) Harness(cwd, registryFile, outboxDir string, argv []string) ([]string, error) {
	w.warn(cwd)
	return w.Worlds.Harness(cwd, registryFile, outboxDir, argv)
}

var (
	_ sessions.Confinement      = (*sandbox.Confiner)(nil)
	_ sessions.Confinement      = refusedConfinement{}
	_ sessions.Confinement      = warnedConfinement{}
	_ sessions.WorldConfinement = (*sandbox.Worlds)(nil)
	_ sessions.WorldConfinement = warnedWorlds{}
)

// pasteDir is where the tmux runner writes its paste files.
func pasteDir(tc sessions.TmuxConfig) string {
	if tc.TempDir != "" {
		return tc.TempDir
	}
	return os.TempDir()
}
