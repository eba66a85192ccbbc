package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// The agent's world (docs/decisions.md §22). Every session runs inside a
// bubblewrap sandbox of its own: new user, mount, PID, IPC, UTS, cgroup
// and network namespaces. Its mount namespace is built from nothing: the
// system and toolchain directories read-only, the session's own clone
// read-write (its .git/config, hooks and info/ read-only), a private copy
// of the harness's own directories mounted over the home directory, a
// private /tmp, and of loopd's state root only the session's outbox and a
// registry directory holding the session's own entry. Nothing else of the
// host is there: not the state root, not another checkout, not a unix
// socket of the host (loopd.sock, an ssh-agent, the operator's tmux).
//
// The session's tmux server runs inside it too (its socket in the world's
// private directory), so `tmux run-shell`/`new-window` from a pane run in
// the same sandbox and no other session exists on that server. loopd is a
// client of that server from outside — and since a tmux server can make a
// client exec a command (`detach-client -E`, or a fake server speaking the
// protocol), every tmux client loopd runs against a world's server runs in
// a client box of its own (ClientCommand): nothing mounted but the system
// and the world's socket directory, no network, no environment.
//
// Landlock stays inside as a second layer (the launcher's inner step).

// World describes one session's sandbox. Paths are host paths and are
// mounted at the same path inside, so every path loopd hands the agent
// (checkout, outbox, registry entry) means the same thing on both sides.
type World struct {
	// Dir is the world's private directory on the host (created 0700 by
	// Prepare): tmux/ (the server's socket), home/ (the private copy of the
	// harness's directories), registry/ (the session's own registry entry),
	// net/ (the egress proxy's socket). The agent sees tmux/, home/ (as its
	// home), registry/ (read-only, at the registry's path) and net/.
	Dir string
	// Checkout is the session's own clone (read-write, the cwd).
	Checkout string
	// ReadOnly are paths inside Checkout mounted read-only over it
	// (.git/config, .git/hooks, .git/info, …).
	ReadOnly []string
	// Shared are paths outside Checkout mounted read-only (a mirror's
	// object store the clone borrows from).
	Shared []string
	// RegistryDir is the session registry's directory as loop-gate looks for
	// it; RegistryFile the session's entry in it (copied into registry/).
	RegistryDir, RegistryFile string
	// OutboxDir is the session's outbox (read-write).
	OutboxDir string
	// Home is the home directory path as the harness expects it; the
	// private home/ is mounted there.
	Home string
	// Executables are programs the agent runs besides the system's (the
	// harness, loopctl, loop-gate): their directories, and the node_modules
	// tree an npm-installed one loads from, are mounted read-only.
	Executables []string
	// Self is the launcher (loopd's executable, or a test binary).
	Self string
	// ReadOnlyExtra are further directories mounted read-only (a toolchain
	// outside the system dirs: GOROOT).
	ReadOnlyExtra []string
	// Writable are further directories mounted read-write
	// (routing.sandbox writable dirs of an embedder's harness).
	Writable []string
	// HostNetwork shares the host's network namespace
	// (routing.sandbox.network: host — degraded: the agent reaches every
	// port on 127.0.0.1).
	HostNetwork bool
	// Env is the environment the sandbox starts with (already allowlisted).
	Env []string
}

// Paths inside a world's private directory.
func (w World) SocketDir() string    { return filepath.Join(w.Dir, "tmux") }
func (w World) Socket() string       { return filepath.Join(w.Dir, "tmux", "s") }
func (w World) HomeCopy() string     { return filepath.Join(w.Dir, "home") }
func (w World) RegistryCopy() string { return filepath.Join(w.Dir, "registry") }
func (w World) NetDir() string       { return filepath.Join(w.Dir, "net") }
func (w World) ProxySocket() string  { return filepath.Join(w.Dir, "net", "proxy") }

// PIDFile is where the front records the host pid of the sandbox's init
// (killing it ends every process of the world). It lies outside every
// directory the agent sees.
func (w World) PIDFile() string { return filepath.Join(w.Dir, "pid") }

// ErrNoBubblewrap: the namespace sandbox cannot be built here.
var ErrNoBubblewrap = errors.New("the agent's namespace sandbox needs bubblewrap (bwrap) and unprivileged user namespaces")

// BwrapPath is the bubblewrap program looked up on PATH.
var BwrapPath = "bwrap"

// CheckNamespaces reports whether bubblewrap can build a world here, with
// an error that names the fix.
func CheckNamespaces() error {
	p, err := exec.LookPath(BwrapPath)
	if err != nil {
		return fmt.Errorf("%w: bwrap is not on PATH — install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), or set routing.sandbox: landlock (degraded: a Landlock list over a shared world)", ErrNoBubblewrap)
	}
	args := []string{"--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--", "/bin/true"}
	if _, err := os.Stat("/bin/true"); err != nil {
		args[len(args)-1] = "/usr/bin/true"
	}
	out, err := exec.Command(p, args...).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		return fmt.Errorf("%w: %s could not create namespaces (%v: %s) — allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0; on Ubuntu 24.04+ also kernel.apparmor_restrict_unprivileged_userns=0), or set routing.sandbox: landlock (degraded)", ErrNoBubblewrap, p, err, msg)
	}
	return nil
}

// systemDirs are mounted read-only (or recreated as the symlinks they are).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// harnessCopyLimit bounds the private copy of the harness's directories.
const harnessCopyLimit = 256 << 20

// harnessCaches are home directories too big to copy that the harness only
// reads as caches: mounted read-only when present.
var harnessCaches = []string{".cache", ".npm", "go/pkg/mod"}

// Prepare creates the world's private directory: the socket, registry and
// net dirs, and the private home holding a copy of the harness's own
// directories and files (HarnessDirs, HarnessFiles, HarnessReadFiles),
// without symlinks, bounded in size. A world's home is made once; a
// respawn keeps the harness's conversation state.
func (w World) Prepare() error {
	if !filepath.IsAbs(w.Dir) || !filepath.IsAbs(w.Checkout) || !filepath.IsAbs(w.Self) {
		return errors.New("sandbox: a world needs absolute Dir, Checkout and Self")
	}
	for _, d := range []string{w.Dir, w.SocketDir(), w.RegistryCopy(), w.NetDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	if _, err := os.Stat(w.HomeCopy()); errors.Is(err, fs.ErrNotExist) && w.Home != "" {
		tmp := w.HomeCopy() + ".new"
		_ = os.RemoveAll(tmp)
		if err := os.MkdirAll(tmp, 0o700); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		budget := int64(harnessCopyLimit)
		skip := map[string]bool{}
		for _, c := range harnessCaches {
			skip[c] = true
		}
		for _, d := range append(append(append([]string{}, HarnessDirs...), HarnessFiles...), HarnessReadFiles...) {
			if skip[d] {
				continue
			}
			if err := copyTree(filepath.Join(w.Home, d), filepath.Join(tmp, d), &budget); err != nil {
				return fmt.Errorf("sandbox: copying the harness's %s into the session's home: %w", d, err)
			}
		}
		for _, d := range HarnessDirs {
			if !skip[d] {
				_ = os.MkdirAll(filepath.Join(tmp, d), 0o700)
			}
		}
		if err := os.Rename(tmp, w.HomeCopy()); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	} else if err := os.MkdirAll(w.HomeCopy(), 0o700); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return w.SyncRegistry()
}

// SyncRegistry copies the session's registry entry into the world (the
// agent reads a copy: the original is replaced by rename on every write,
// which a bind mount of the file would not follow).
func (w World) SyncRegistry() error {
	if w.RegistryFile == "" {
		return nil
	}
	b, err := os.ReadFile(w.RegistryFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("sandbox: reading the session's registry entry: %w", err)
	}
	dst := filepath.Join(w.RegistryCopy(), filepath.Base(w.RegistryFile))
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return os.Rename(tmp, dst)
}

// copyTree copies regular files and directories from src to dst (no
// symlinks, no devices), spending budget; a missing src is nothing to do.
func copyTree(src, dst string, budget *int64) error {
	fi, err := os.Lstat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		if err := os.MkdirAll(dst, 0o700); err != nil {
			return err
		}
		ents, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), budget); err != nil {
				return err
			}
		}
		return nil
	case fi.Mode().IsRegular():
		if *budget -= fi.Size(); *budget < 0 {
			return fmt.Errorf("more than %d MiB to copy (at %s)", harnessCopyLimit>>20, src)
		}
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm()|0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
	return nil // symlinks, sockets, devices: not carried into the world
}

// BwrapArgs are bubblewrap's arguments building w (without the program).
func (w World) BwrapArgs() []string {
	a := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--new-session", "--hostname", "theloop-agent"}
	if !w.HostNetwork {
		a = append(a, "--unshare-net")
	}
	a = append(a, systemMounts()...)
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run", "--tmpfs", "/var/tmp")
	// /etc/resolv.conf and friends often point into /run.
	for _, f := range []string{"/etc/resolv.conf", "/etc/localtime"} {
		if real, err := filepath.EvalSymlinks(f); err == nil && !within(real, "/etc") && !within(real, "/usr") {
			a = append(a, "--ro-bind-try", real, real)
		}
	}
	if w.Home != "" {
		a = append(a, "--bind", w.HomeCopy(), w.Home)
		for _, c := range harnessCaches {
			p := filepath.Join(w.Home, c)
			a = append(a, "--ro-bind-try", p, p)
		}
	}
	ro := map[string]bool{}
	for _, d := range append(append([]string{}, w.ReadOnlyExtra...), executableDirs(w.Executables)...) {
		if d == "" || ro[d] || underSystem(d) {
			continue
		}
		ro[d] = true
		a = append(a, "--ro-bind-try", d, d)
	}
	a = append(a, "--ro-bind", w.Self, w.Self)
	a = append(a, "--bind", w.Checkout, w.Checkout)
	for _, p := range w.ReadOnly {
		a = append(a, "--ro-bind-try", p, p)
	}
	for _, p := range w.Shared {
		a = append(a, "--ro-bind-try", p, p)
	}
	for _, p := range w.Writable {
		a = append(a, "--bind-try", p, p)
	}
	if w.RegistryDir != "" {
		a = append(a, "--ro-bind", w.RegistryCopy(), w.RegistryDir)
	}
	if w.OutboxDir != "" {
		a = append(a, "--bind", w.OutboxDir, w.OutboxDir)
	}
	a = append(a, "--bind", w.SocketDir(), w.SocketDir(), "--ro-bind", w.NetDir(), w.NetDir())
	a = append(a, "--chdir", w.Checkout, "--clearenv")
	for _, kv := range w.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			a = append(a, "--setenv", k, v)
		}
	}
	return a
}

// systemMounts mounts the system directories read-only, recreating those
// that are symlinks (merged /usr) as the same symlinks.
func systemMounts() []string {
	var a []string
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if t, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", t, d)
			}
			continue
		}
		a = append(a, "--ro-bind", d, d)
	}
	return a
}

func underSystem(d string) bool {
	for _, s := range systemDirs {
		if within(d, s) {
			return true
		}
	}
	return false
}

// executableDirs are the directories an executable needs: its own, the one
// a symlink to it points into, and the node_modules tree it loads from.
func executableDirs(exes []string) []string {
	var out []string
	for _, exe := range exes {
		if exe == "" {
			continue
		}
		out = append(out, filepath.Dir(exe))
		if real, err := filepath.EvalSymlinks(exe); err == nil && filepath.Dir(real) != filepath.Dir(exe) {
			out = append(out, filepath.Dir(real))
		}
		if nm := nodeModulesRoot(exe); nm != "" {
			out = append(out, nm)
		}
	}
	sort.Strings(out)
	return out
}

// ClientCommand wraps a tmux client argv that loopd runs against a world's
// server: a box with the system read-only, the world's socket directory,
// extra read-only paths (the paste files' directory), no network, no
// environment beyond PATH and LANG, dying with its parent.
func ClientCommand(socketDir string, readOnly []string, argv []string) []string {
	a := []string{BwrapPath, "--unshare-all", "--new-session", "--die-with-parent"}
	a = append(a, systemMounts()...)
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", socketDir, socketDir)
	for _, p := range readOnly {
		a = append(a, "--ro-bind-try", p, p)
	}
	a = append(a, "--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8", "--")
	return append(a, argv...)
}

// FrontArg turns the launcher into the front of a world: it starts
// bubblewrap detached (a session of its own), records the sandbox's host
// pid, and exits with the status the keeper inside reports (the tmux
// client's that created the session), leaving the world running.
const FrontArg = "__loop-sandbox-front"

// FrontCommand is the argv loopd runs to start w with target (the keeper
// and what it runs) inside.
func FrontCommand(w World, target []string) []string {
	out := []string{w.Self, FrontArg, w.PIDFile(), "--", BwrapPath}
	out = append(out, w.BwrapArgs()...)
	out = append(out, "--info-fd", "4", "--")
	return append(out, target...)
}

// runWorldFront is FrontArg's body: args are PIDFILE -- bwrap args...
func runWorldFront(args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "loop sandbox: "+format+"\n", a...)
		return exitLaunchFailed
	}
	if len(args) < 3 || args[1] != "--" {
		return fail("usage: %s PIDFILE -- bwrap args...", FrontArg)
	}
	pidFile, argv := args[0], args[2:]
	status, statusW, err := os.Pipe()
	if err != nil {
		return fail("status pipe: %v", err)
	}
	info, infoW, err := os.Pipe()
	if err != nil {
		return fail("info pipe: %v", err)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fail("%s: %v", argv[0], err)
	}
	// bubblewrap outlives the front: its output goes to a file of the
	// world's (outside the agent's view), copied to the front's stderr once
	// the target's status is in, so the caller neither waits for the world
	// to end nor loses what the tmux client said.
	logPath := filepath.Join(filepath.Dir(pidFile), "spawn.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fail("the world's log: %v", err)
	}
	defer func() {
		if b, err := os.ReadFile(logPath); err == nil && len(b) > 0 {
			if len(b) > 64<<10 {
				b = b[len(b)-64<<10:]
			}
			_, _ = os.Stderr.Write(b)
		}
	}()
	cmd := exec.Command(path, argv[1:]...)
	// bubblewrap itself runs on the host: the allowlist (the world's own
	// environment is set by --clearenv/--setenv, never inherited).
	cmd.Env = Env(os.Environ(), nil)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{statusW, infoW} // fd 3: the keeper's status; fd 4: bwrap's info
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fail("starting bubblewrap: %v", err)
	}
	statusW.Close()
	infoW.Close()
	logf.Close()
	var in struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.NewDecoder(io.LimitReader(info, 64<<10)).Decode(&in); err == nil && in.ChildPID > 0 {
		_ = os.WriteFile(pidFile, []byte(strconv.Itoa(in.ChildPID)+"\n"), 0o600)
	}
	info.Close()
	var b [1]byte
	if n, _ := status.Read(b[:]); n == 1 {
		return int(b[0])
	}
	if err := cmd.Wait(); err != nil {
		return fail("the sandbox failed before its target ran: %v", err)
	}
	return fail("the sandbox exited without its target's status")
}

// KillWorld ends every process of the world whose init's host pid the
// front recorded (SIGKILL to a PID namespace's init kills the namespace),
// after checking the pid still is a bubblewrap process. No world running
// is not an error.
func KillWorld(w World) error {
	b, err := os.ReadFile(w.PIDFile())
	if errors.Is(err, fs.ErrNotExist) {
		_ = os.Remove(w.Socket())
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("sandbox: unreadable pid file %s", w.PIDFile())
	}
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err == nil && strings.Contains(filepath.Base(strings.SplitN(string(cmd), "\x00", 2)[0]), "bwrap") {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = os.Remove(w.PIDFile())
	// A server killed with its world leaves its socket behind; a stale
	// socket would read as a world to ask.
	_ = os.Remove(w.Socket())
	return nil
}

// AttachCommand is the shell command an operator runs to attach to a
// world's session: tmux's client in a box of its own (the operator's
// terminal, the world's socket, nothing else), because the world's server
// — the agent's, from its pane — can make an attached client run a command
// (`detach-client -E`) as whoever runs that client.
func AttachCommand(socketDir, socket, name string) string {
	argv := ClientCommand(socketDir, nil, []string{"tmux", "-S", socket, "attach", "-t", "=" + name})
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a == "--" && i > 0 && argv[i-1] == "C.UTF-8" {
			b.WriteString(`--dev-bind-try /dev/pts /dev/pts --setenv TERM "${TERM:-xterm-256color}" --`)
			continue
		}
		b.WriteString(shellQuote(a))
	}
	return b.String()
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}
