package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Policy is what one launcher applies before it runs its target. It travels
// as JSON on the launcher's command line, so it holds paths and names only,
// never a value of the environment.
type Policy struct {
	// Landlock applies the filesystem ruleset below; false (routing.sandbox:
	// off) keeps only the environment filter and the launcher's ancestry.
	Landlock bool `json:"landlock"`
	// Env: the target's environment is always Env(environ, Env) — the
	// variables named here (plus BaseEnv and LC_*) and nothing else. An
	// empty list keeps BaseEnv only; there is no pass-through (an
	// omitted list once meant one, and an empty routing.agentEnv then
	// handed the tmux server loopd's whole environment).
	Env []string `json:"env,omitempty"`
	// ReadWrite are directories (and everything below) the target may
	// read, write, create in, execute from and remove from.
	ReadWrite []string `json:"rw,omitempty"`
	// ReadWriteFiles are single files it may read and write.
	ReadWriteFiles []string `json:"rwFiles,omitempty"`
	// ReadExec are directories it may read and execute from.
	ReadExec []string `json:"rx,omitempty"`
	// ReadFiles are single files it may read and execute.
	ReadFiles []string `json:"roFiles,omitempty"`
	// Devices are device files or directories of them it may read, write and
	// use ioctl on (terminals).
	Devices []string `json:"dev,omitempty"`
	// TempDir becomes the target's TMPDIR (a directory granted in
	// ReadWrite; loopd's own TMPDIR is not).
	TempDir string `json:"tmp,omitempty"`
	// Registry is the one path below a protected one the target may read
	// (read-only): the session registry directory for the tmux server,
	// a session's own registry entry for its harness. loop-gate needs it.
	Registry string `json:"registry,omitempty"`
	// Outbox is the one directory below a protected one the target may
	// write: the session's outbox (the tmux server: the outbox root, which
	// each pane narrows to its own), where a claim records the ticket
	// effects loopd performs.
	Outbox string `json:"outbox,omitempty"`
	// Protected are paths no grant may cover, lie in or contain (loopd's
	// state root), Registry and Outbox excepted. Validate enforces it.
	Protected []string `json:"protected,omitempty"`
	// Bridge, for a world's keeper, is the egress proxy's socket the keeper
	// joins ProxyListen to.
	Bridge string `json:"bridge,omitempty"`
}

// Encode renders the policy for the launcher's command line.
func (p Policy) Encode() (string, error) {
	b, err := json.Marshal(p)
	return string(b), err
}

// DecodePolicy reads what Encode wrote.
func DecodePolicy(s string) (Policy, error) {
	var p Policy
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Policy{}, fmt.Errorf("sandbox: unreadable policy: %w", err)
	}
	return p, nil
}

// Validate refuses a policy that would hand the agent a protected path:
// a granted directory or file that is, lies above or lies below a
// protected path — Registry excepted, which may lie below one. Every path
// must be absolute.
func (p Policy) Validate() error {
	for _, pr := range p.Protected {
		if !filepath.IsAbs(pr) {
			return fmt.Errorf("sandbox: protected path %q is not absolute", pr)
		}
	}
	check := func(kind string, paths []string, mayLieBelow bool) error {
		for _, g := range paths {
			if !filepath.IsAbs(g) {
				return fmt.Errorf("sandbox: %s path %q is not absolute", kind, g)
			}
			for _, pr := range p.Protected {
				switch {
				case within(pr, g):
					return fmt.Errorf("sandbox: %s %s contains loopd's %s, which the agent must not reach; move one of them apart (routing.workspace.root / routing.spawnWorkdir outside the state root)", kind, g, pr)
				case within(g, pr) && !mayLieBelow:
					return fmt.Errorf("sandbox: %s %s lies inside loopd's %s, which the agent must not reach", kind, g, pr)
				}
			}
		}
		return nil
	}
	for _, c := range []struct {
		kind  string
		paths []string
		below bool
	}{
		{"read-write directory", p.ReadWrite, false}, {"read-write file", p.ReadWriteFiles, false},
		{"read-exec directory", p.ReadExec, false}, {"read-only file", p.ReadFiles, false},
		{"device", p.Devices, false}, {"session registry", nonEmpty(p.Registry), true},
		{"session outbox", nonEmpty(p.Outbox), true},
	} {
		if err := check(c.kind, c.paths, c.below); err != nil {
			return err
		}
	}
	return nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// ErrNoLandlock: the kernel offers no Landlock, so a policy that asks for
// it cannot be applied (the launcher then refuses to run its target).
var ErrNoLandlock = errors.New("this kernel offers no Landlock (Linux 5.13+ with landlock in the lsm= boot list): the agent cannot be confined; set routing.sandbox: off to run it unconfined, or run loopd where Landlock is enabled")

// ABI returns the kernel's Landlock ABI version; 0 means none.
func ABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// Available reports whether Landlock can confine the agent here (ABI ≥ 1).
func Available() bool { return ABI() >= 1 }

// apply restricts the calling process (every thread) to the policy. Rights
// newer than the kernel are dropped (best effort); a kernel without
// Landlock at all is ErrNoLandlock, never a silent pass. Signal and
// abstract-unix-socket scoping (ABI ≥ 6) keep the agent from signalling
// its launcher or loopd and from reaching abstract sockets outside its
// domain; Landlock's ptrace rule keeps it out of /proc/<pid>/environ and
// /mem of every process outside its domain.
func (p Policy) apply() error {
	if !p.Landlock {
		return nil
	}
	if !Available() {
		return ErrNoLandlock
	}
	if err := p.Validate(); err != nil {
		return err
	}
	var rules []landlock.Rule
	// Paths that do not exist are skipped: a harness directory the user
	// never created cannot be created later either, which is the safe side.
	add := func(r landlock.FSRule) { rules = append(rules, r.IgnoreIfMissing()) }
	if len(p.ReadWrite) > 0 {
		// Unix sockets created in writable dirs (a tool's own agent socket)
		// stay usable on ABI ≥ 9; loopd.sock is not below any of them.
		add(landlock.RWDirs(p.ReadWrite...).WithRefer().WithResolveUnix())
	}
	if len(p.ReadWriteFiles) > 0 {
		add(landlock.RWFiles(p.ReadWriteFiles...))
	}
	if len(p.ReadExec) > 0 {
		add(landlock.RODirs(p.ReadExec...))
	}
	if len(p.ReadFiles) > 0 {
		add(landlock.ROFiles(p.ReadFiles...))
	}
	for _, d := range p.Devices {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			add(landlock.RWDirs(d).WithIoctlDev())
		} else {
			add(landlock.RWFiles(d).WithIoctlDev())
		}
	}
	if p.Registry != "" {
		if fi, err := os.Stat(p.Registry); err == nil && fi.IsDir() {
			add(landlock.PathAccess(landlock.AccessFSSet(llsys.AccessFSReadFile|llsys.AccessFSReadDir), p.Registry))
		} else {
			add(landlock.PathAccess(landlock.AccessFSSet(llsys.AccessFSReadFile), p.Registry))
		}
	}
	if p.Outbox != "" {
		add(landlock.RWDirs(p.Outbox))
	}
	cfg := landlock.Config{HandledAccessFS: landlock.V11.HandledAccessFS, Scoped: landlock.V11.Scoped}
	if err := cfg.BestEffort().Restrict(rules...); err != nil {
		return fmt.Errorf("sandbox: applying the Landlock ruleset: %w", err)
	}
	return nil
}

// PolicyOptions describe one confinement: the tmux server's (Worktree is the
// workspace root, RegistryFile empty and RegistryDir set) or one harness's
// (Worktree its checkout, RegistryFile its registry entry).
type PolicyOptions struct {
	// Worktree is the directory granted read-write.
	Worktree string
	// StateRoot is loopd's state root: protected as a whole.
	StateRoot string
	// RegistryDir, for the server, and RegistryFile, for a harness, are
	// what loop-gate reads under the state root (read-only).
	RegistryDir, RegistryFile string
	// OutboxDir is the one directory under the state root the target may
	// write (the outbox root for the server, a session's own for a
	// harness; "" for none).
	OutboxDir string
	// Home is the user's home directory (the harness's own dirs are below).
	Home string
	// TempDir is the agent's temporary directory (read-write).
	TempDir string
	// TmuxDir is the tmux socket directory, read-write for the server so it
	// can create its socket ("" for a harness).
	TmuxDir string
	// Executables are programs the target may run besides the system's
	// (loopd's own executable for the pane launchers, the harness, loopctl,
	// loop-gate): the directory of each is granted read+execute, except
	// loopd's, granted as the single file (Self).
	Executables []string
	// Self is loopd's executable (read+execute as a single file).
	Self string
	// Env names the variables to keep besides BaseEnv: routing.agentEnv for
	// the server, plus the session's variables for a harness.
	Env []string
	// Off is routing.sandbox: off.
	Off bool
	// InWorld: the policy is a world's inner layer, whose home is the
	// world's private copy (made by World.Prepare): nothing is created in
	// the host's home.
	InWorld bool
}

// nodeModulesRoot is the outermost node_modules directory holding exe or
// the file it links to ("" when neither is in one).
func nodeModulesRoot(exe string) string {
	for _, p := range []string{exe, evalOr(exe)} {
		parts := strings.Split(filepath.ToSlash(p), "/")
		for i, part := range parts {
			if part == "node_modules" && i > 0 {
				return filepath.FromSlash(strings.Join(parts[:i+1], "/"))
			}
		}
	}
	return ""
}

func evalOr(p string) string {
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	return p
}

// SystemReadExec are the directories every target may read and run from.
var SystemReadExec = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/sys", "/usr/local"}

// HarnessDirs are the harness's own config and cache paths under the home
// directory that stay writable (Codex: ~/.codex; Gemini: ~/.gemini;
// Cursor: ~/.cursor and ~/.config/cursor; Claude Code: ~/.claude, ~/.claude.json,
// its native install and locks under ~/.local; npm and tool caches).
// Claude Code writes ~/.claude.json through a lock dir and a temp file
// beside it and falls back to a direct write when the home directory is not
// writable, so the file itself is granted.
var (
	HarnessDirs  = []string{".claude", ".codex", ".gemini", ".cursor", ".config/cursor", ".cache", ".npm", ".config/claude", ".local/share/claude", ".local/state/claude", "go/pkg/mod"}
	HarnessFiles = []string{".claude.json"}
	// HarnessReadFiles are read-only configuration the harness's tools read.
	HarnessReadFiles = []string{".gitconfig", ".config/git/config", ".config/git/ignore"}
)

// NewPolicy builds the policy for o. Directories of the harness that do not
// exist yet are created (0700) so that the agent can use them; nothing is
// created under the state root.
func NewPolicy(o PolicyOptions) Policy {
	p := Policy{Landlock: !o.Off, Env: o.Env, Protected: []string{o.StateRoot}}
	if o.Worktree != "" {
		p.ReadWrite = append(p.ReadWrite, o.Worktree)
		if common := gitCommonDir(o.Worktree); common != "" {
			p.ReadWrite = append(p.ReadWrite, common)
		}
	}
	if o.TempDir != "" {
		p.ReadWrite = append(p.ReadWrite, o.TempDir)
		p.TempDir = o.TempDir
	}
	if o.TmuxDir != "" {
		p.ReadWrite = append(p.ReadWrite, o.TmuxDir)
	}
	if o.Home != "" {
		for _, d := range HarnessDirs {
			dir := filepath.Join(o.Home, d)
			if !o.Off && !o.InWorld {
				_ = os.MkdirAll(dir, 0o700)
			}
			p.ReadWrite = append(p.ReadWrite, dir)
		}
		for _, f := range HarnessFiles {
			p.ReadWriteFiles = append(p.ReadWriteFiles, filepath.Join(o.Home, f))
		}
		for _, f := range HarnessReadFiles {
			p.ReadFiles = append(p.ReadFiles, filepath.Join(o.Home, f))
		}
	}
	p.ReadExec = append(p.ReadExec, SystemReadExec...)
	if goroot := os.Getenv("GOROOT"); goroot != "" {
		p.ReadExec = append(p.ReadExec, goroot)
	}
	for _, exe := range o.Executables {
		if exe == "" {
			continue
		}
		p.ReadExec = append(p.ReadExec, filepath.Dir(exe))
		if real, err := filepath.EvalSymlinks(exe); err == nil && filepath.Dir(real) != filepath.Dir(exe) {
			// A symlinked install (~/.local/bin/claude → versions/x)
			// runs from where the link points.
			p.ReadExec = append(p.ReadExec, filepath.Dir(real))
		}
		// An npm-installed harness (codex, gemini: node_modules/.bin/x →
		// ../@scope/pkg/bin/x.js) loads its modules and native binaries
		// from the whole node_modules tree it lives in.
		if nm := nodeModulesRoot(exe); nm != "" {
			p.ReadExec = append(p.ReadExec, nm)
		}
	}
	if o.Self != "" {
		p.ReadFiles = append(p.ReadFiles, o.Self)
	}
	// /etc/resolv.conf and friends are often links into /run.
	for _, f := range []string{"/etc/resolv.conf", "/etc/localtime", "/etc/mtab"} {
		if real, err := filepath.EvalSymlinks(f); err == nil && !within(real, "/etc") && !within(real, "/usr") && !within(real, "/proc") {
			p.ReadFiles = append(p.ReadFiles, real)
		}
	}
	// The server's layer is fixed when it starts, before the sessions it
	// will host exist: it may read the registry directory (no secrets:
	// names, ids, paths); each pane narrows it to its own entry.
	p.Registry = o.RegistryDir
	if o.RegistryFile != "" {
		p.Registry = o.RegistryFile
	}
	p.Outbox = o.OutboxDir
	p.Devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/pts", "/dev/ptmx", "/dev/shm"}
	return p
}

// gitCommonDir is the shared repository a git worktree writes its objects
// and refs to (the worktree's .git file names its gitdir, whose commondir
// names the shared one); "" when dir is not a linked worktree.
func gitCommonDir(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, ".git"))
	if err != nil {
		return ""
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return ""
	}
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(dir, gitdir)
	}
	c, err := os.ReadFile(filepath.Join(gitdir, "commondir"))
	if err != nil {
		return gitdir
	}
	common := strings.TrimSpace(string(c))
	if !filepath.IsAbs(common) {
		common = filepath.Join(gitdir, common)
	}
	return filepath.Clean(common)
}
