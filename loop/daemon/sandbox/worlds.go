package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	harnesses "github.com/theloop-dev/theloop/harness"
)

// Worlds confines the sessions one loopd hosts, each in a world of its own
// (world.go). Its methods are the sessions.WorldConfinement seam; the
// daemon passes a *Worlds to sessions.NewConfinedTmux (this package does
// not import sessions). The embedded Confiner supplies the Landlock layer
// each world applies inside and the paths it protects.
type Worlds struct {
	*Confiner
	// Root holds the worlds' private directories (0700), one per session,
	// named by a hash of the session's name so that socket paths stay
	// short. It must not be the state root or lie where an agent can write.
	Root string
	// Egress is loopd's proxy for the worlds' network (nil with
	// HostNetwork).
	Egress *Egress
	// AllowHosts are routing.sandbox.allowHosts, allowed to every world
	// besides its harness's API hosts.
	AllowHosts []string
	// HostNetwork is routing.sandbox.network: host (degraded).
	HostNetwork bool
	// SharedFor names paths outside a checkout its clone needs read-only
	// (a mirror's object store), from loopd's own records — never from a
	// file in the checkout. Nil: none.
	SharedFor func(checkout string) []string
	// ClientPaths are paths loopd's tmux clients read (the paste files'
	// directory): mounted read-only into their boxes.
	ClientPaths []string
}

// Prepare checks that worlds can be built here (bubblewrap, user
// namespaces) and prepares the Landlock layer.
func (w *Worlds) Prepare() error {
	if w.Root == "" || !filepath.IsAbs(w.Root) {
		return fmt.Errorf("sandbox: the worlds' root %q must be an absolute path", w.Root)
	}
	if err := CheckNamespaces(); err != nil {
		return err
	}
	if err := os.MkdirAll(w.Root, 0o700); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if w.Egress == nil && !w.HostNetwork {
		w.Egress = &Egress{}
	}
	// The Landlock layer's paths, without what Confiner.Prepare makes for a
	// shared world (its temp and tmux dirs, the harness's dirs in the
	// host's home): a world has its own.
	if err := w.Confiner.defaults(); err != nil {
		return err
	}
	for _, d := range []string{w.RegistryDir, w.OutboxRoot} {
		if d != "" {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return fmt.Errorf("sandbox: %w", err)
			}
		}
	}
	if !Available() {
		return ErrNoLandlock
	}
	return nil
}

// dir is session name's private directory.
func (w *Worlds) dir(name string) string {
	sum := sha256.Sum256([]byte(name))
	return filepath.Join(w.Root, hex.EncodeToString(sum[:6]))
}

// Socket implements sessions.WorldConfinement.
func (w *Worlds) Socket(name string) string { return World{Dir: w.dir(name)}.Socket() }

// Client implements sessions.WorldConfinement.
func (w *Worlds) Client(name string, argv []string) []string {
	return ClientCommand(World{Dir: w.dir(name)}.SocketDir(), w.ClientPaths, argv)
}

// proxyNames are the variables that carry the egress proxy to a harness.
var proxyNames = []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "NO_PROXY", "no_proxy"}

// gitReadOnly are the paths of a clone that git reads as configuration or
// runs: read-only to the agent (fixed names; nothing in the checkout is
// read to decide them).
var gitReadOnly = []string{".git/config", ".git/hooks", ".git/info", ".git/objects/info", ".git/commondir", ".git/gitdir"}

// HarnessOf guesses the harness from its program's name, for the egress
// allowlist: the registered harness whose name the program's starts with
// (cursor for cursor-agent); "" otherwise.
func HarnessOf(argv0 string) string {
	b := filepath.Base(argv0)
	for _, d := range harnesses.All() {
		if strings.HasPrefix(b, d.Name) {
			return d.Name
		}
	}
	return ""
}

// World implements sessions.WorldConfinement: it prepares name's world and
// returns the front's argv running tmuxArgv inside (through a keeper that
// stays with the tmux server, and the Landlock layer).
func (w *Worlds) World(name, checkout, registryFile, outboxDir, harness string, tmuxArgv []string) ([]string, error) {
	if outboxDir != "" && (w.OutboxRoot == "" || !within(outboxDir, w.OutboxRoot) || outboxDir == w.OutboxRoot) {
		return nil, fmt.Errorf("sandbox: the session outbox %s is not a directory below the outbox root %q", outboxDir, w.OutboxRoot)
	}
	wd := World{
		Dir: w.dir(name), Checkout: checkout, RegistryDir: w.RegistryDir, RegistryFile: registryFile,
		OutboxDir: outboxDir, Home: w.Home, Executables: w.Executables, Self: w.Self,
		Writable: w.Writable, HostNetwork: w.HostNetwork,
	}
	ro, err := gitReadOnlyPaths(checkout)
	if err != nil {
		return nil, err
	}
	wd.ReadOnly = ro
	if w.SharedFor != nil {
		wd.Shared = w.SharedFor(checkout)
	}
	if goroot := os.Getenv("GOROOT"); goroot != "" {
		wd.ReadOnlyExtra = append(wd.ReadOnlyExtra, goroot)
	}
	for _, d := range []string{w.StateRoot, w.Root} {
		if within(checkout, d) {
			return nil, fmt.Errorf("sandbox: the checkout %s lies inside loopd's %s; move routing.workspace.root out of it", checkout, d)
		}
	}
	if err := wd.Prepare(); err != nil {
		return nil, err
	}
	env := Env(os.Environ(), w.AgentEnv)
	env = append(withoutVar(withoutVar(env, "TMPDIR"), "TMUX_TMPDIR"), "TMPDIR=/tmp")
	if w.Home != "" {
		env = append(withoutVar(env, "HOME"), "HOME="+w.Home)
	}
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "SHELL=") }) {
		// tmux runs new-window's command with $SHELL, else the user's login
		// shell, which for a service account is often nologin.
		env = append(env, "SHELL=/bin/sh")
	}
	if !w.HostNetwork {
		env = append(env, ProxyEnv()...)
		if err := w.Egress.Serve(wd.ProxySocket(), name, w.allowFor(harness)); err != nil {
			return nil, err
		}
	}
	wd.Env = env
	// The keeper's layer: the world's own paths (its server and every
	// pane below it), the proxy bridge.
	o := w.base(checkout)
	o.TempDir = "/tmp"
	o.TmuxDir = wd.SocketDir()
	o.RegistryFile, o.OutboxDir = registryFile, outboxDir
	o.Env = append(append(append([]string{}, w.AgentEnv...), proxyNames...), SessionEnv...)
	p := worldPolicy(o, w.Writable)
	if !w.HostNetwork {
		p.Bridge = wd.ProxySocket()
		p.ReadWrite = append(p.ReadWrite, wd.NetDir())
	}
	keeper, err := command(w.Self, p, modeKeeper, tmuxArgv)
	if err != nil {
		return nil, err
	}
	return FrontCommand(wd, keeper), nil
}

// Harness implements sessions.Confinement for a pane inside a world: the
// Landlock layer of the session (its checkout, registry entry, outbox, the
// world's /tmp).
func (w *Worlds) Harness(cwd, registryFile, outboxDir string, argv []string) ([]string, error) {
	o := w.base(cwd)
	o.TempDir = "/tmp"
	o.RegistryFile, o.OutboxDir = registryFile, outboxDir
	o.Env = append(append(append(append([]string{}, SessionEnv...), PaneEnv...), w.AgentEnv...), proxyNames...)
	return Command(w.Self, worldPolicy(o, w.Writable), argv)
}

// worldPolicy is the Landlock layer inside a world. The state root is not
// protected there the way it is over a shared file system: the world holds
// none of it but the session's outbox and a copy of its registry entry
// (mounted read-only), so the world's private /tmp may be granted even
// when the host's state root lies below the host's /tmp.
func worldPolicy(o PolicyOptions, writable []string) Policy {
	o.InWorld = true
	p := NewPolicy(o)
	p.Protected = nil
	p.ReadWrite = append(p.ReadWrite, writable...)
	return p
}

// Server implements sessions.Confinement; worlds start their servers
// through World, never through a shared one.
func (w *Worlds) Server([]string) ([]string, error) {
	return nil, errors.New("sandbox: worlds have no shared tmux server")
}

// CheckServer implements sessions.Confinement (a world's server is
// confined by construction).
func (w *Worlds) CheckServer(int) error { return nil }

// EndWorld implements sessions.WorldConfinement.
func (w *Worlds) EndWorld(name string) error {
	wd := World{Dir: w.dir(name)}
	if w.Egress != nil {
		w.Egress.Stop(wd.ProxySocket())
	}
	return KillWorld(wd)
}

// SyncRegistry refreshes the copy of a session's registry entry its world
// reads (after loopd rewrote the entry).
func (w *Worlds) SyncRegistry(name, registryFile string) error {
	return World{Dir: w.dir(name), RegistryFile: registryFile}.SyncRegistry()
}

// gitReadOnlyPaths readies the clone's configuration paths for their
// read-only mounts. bubblewrap follows a symlink given as a mount's source,
// so a link the agent planted in an earlier world (.git/config → loopd's
// key) would mount its target into the next one: every such path must be
// what it claims, a directory or a regular file of the clone, never a link.
// A link is replaced (by an empty file or directory); the directories are
// created when missing, so the agent can never add hooks later. A checkout
// whose .git is not a directory (an old-style worktree) gets none: git
// then does not work inside, and nothing of it is read outside.
func gitReadOnlyPaths(checkout string) ([]string, error) {
	gitDir := filepath.Join(checkout, ".git")
	fi, err := os.Lstat(gitDir)
	if err != nil || !fi.IsDir() {
		return nil, nil
	}
	var out []string
	for _, rel := range gitReadOnly {
		// Every directory between .git and the path must be a directory
		// of the clone, not a link: MkdirAll below, and bubblewrap's mount
		// source, would follow one (.git/objects → a host directory).
		if err := unlinkParents(gitDir, filepath.Dir(filepath.Join(checkout, rel))); err != nil {
			return nil, err
		}
		p := filepath.Join(checkout, rel)
		wantDir := rel != ".git/config" && rel != ".git/commondir" && rel != ".git/gitdir"
		fi, err := os.Lstat(p)
		switch {
		case err == nil && fi.Mode()&os.ModeSymlink != 0, err == nil && wantDir != fi.IsDir(), err == nil && !wantDir && !fi.Mode().IsRegular():
			if err := os.RemoveAll(p); err != nil {
				return nil, fmt.Errorf("sandbox: replacing %s (not what a clone holds there): %w", p, err)
			}
			fallthrough
		case os.IsNotExist(err):
			if !wantDir && rel != ".git/config" {
				continue // commondir/gitdir: absent in a clone, stay absent
			}
			if wantDir {
				err = os.MkdirAll(p, 0o755)
			} else {
				err = os.WriteFile(p, nil, 0o644)
			}
			if err != nil {
				return nil, fmt.Errorf("sandbox: %w", err)
			}
		case err != nil:
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// HostPath implements sessions.WorldConfinement: a path under the home
// as the harness sees it is under the world's private copy on the host.
func (w *Worlds) HostPath(name, path string) string {
	if w.Home == "" || !within(filepath.Clean(path), w.Home) {
		return path
	}
	rel, err := filepath.Rel(w.Home, filepath.Clean(path))
	if err != nil {
		return path
	}
	return filepath.Join(World{Dir: w.dir(name)}.HomeCopy(), rel)
}

// Attach implements sessions.WorldConfinement.
func (w *Worlds) Attach(name string) string {
	wd := World{Dir: w.dir(name)}
	return AttachCommand(wd.SocketDir(), wd.Socket(), name)
}

func (w *Worlds) allowFor(harness string) Allowlist {
	var hosts []string
	if d := harnesses.ByName(HarnessOf(harness)); d != nil {
		hosts = d.Egress
	}
	return append(append(Allowlist{}, hosts...), w.AllowHosts...)
}

// ResumeEgress serves name's egress proxy again when its world is still
// running (after loopd restarted); no world is nothing to do.
func (w *Worlds) ResumeEgress(name, harness string) error {
	if w.HostNetwork || w.Egress == nil {
		return nil
	}
	wd := World{Dir: w.dir(name)}
	if _, err := os.Stat(wd.PIDFile()); err != nil {
		return nil
	}
	return w.Egress.Serve(wd.ProxySocket(), name, w.allowFor(harness))
}

// unlinkParents makes every path component from below root down to dir a
// real directory: a link (or a file) in its place is removed and replaced
// by an empty directory. root itself was checked by the caller.
func unlinkParents(root, dir string) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == "." {
		return nil
	}
	cur := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		switch {
		case err == nil && fi.IsDir():
			continue
		case err == nil:
			if err := os.Remove(cur); err != nil {
				return fmt.Errorf("sandbox: replacing %s (a link where the clone has a directory): %w", cur, err)
			}
		case !os.IsNotExist(err):
			return fmt.Errorf("sandbox: %w", err)
		}
		if err := os.Mkdir(cur, 0o755); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	return nil
}
