package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The launcher runs in three roles, chosen by the word after the policy:
//
//	<exe> __loop-sandbox-exec POLICY -- argv...           outer (foreground)
//	<exe> __loop-sandbox-exec POLICY --detach -- argv...  front of a keeper
//	<exe> __loop-sandbox-exec POLICY --keeper -- argv...  outer that outlives its caller
//	<exe> __loop-sandbox-exec POLICY --inner -- argv...   applies POLICY, execs argv
//
// The outer (and the keeper) stays unconfined: it makes itself a child
// subreaper, starts the inner step, relays termination signals to it, and
// once the target exits keeps reaping until no descendant is left, so a
// process the agent double-forks is reparented to it — below a launcher,
// where InSandbox finds it — rather than to init. The inner step applies
// Landlock (scoped: it cannot signal the outer) and execs the target.
//
// --detach is for a command that leaves a daemon behind (the tmux client
// that starts the tmux server): the front starts a keeper in a new session,
// returns the target's exit status as soon as the target exits, and the
// keeper stays with the daemon it adopted.
const (
	modeDetach = "--detach"
	modeKeeper = "--keeper"
	modeInner  = "--inner"
)

// Command returns the argv that runs argv under p through the launcher self
// (loopd's executable, or a test binary that calls MaybeRunLauncher), in the
// foreground: it exits when the target and everything it started are gone.
func Command(self string, p Policy, argv []string) ([]string, error) {
	return command(self, p, "", argv)
}

// DetachedCommand is Command for a target that leaves a daemon behind: the
// launcher returns the target's exit status as soon as the target exits,
// while a keeper (still below which the daemon runs) waits for the rest.
func DetachedCommand(self string, p Policy, argv []string) ([]string, error) {
	return command(self, p, modeDetach, argv)
}

func command(self string, p Policy, mode string, argv []string) ([]string, error) {
	if !filepath.IsAbs(self) {
		return nil, fmt.Errorf("sandbox: launcher %q must be an absolute path", self)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("sandbox: nothing to launch")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	enc, err := p.Encode()
	if err != nil {
		return nil, err
	}
	out := []string{self, LauncherArg, enc}
	if mode != "" {
		out = append(out, mode)
	}
	return append(append(out, "--"), argv...), nil
}

// MaybeRunLauncher turns this process into the launcher when it was started
// as one (its first argument is LauncherArg), and never returns then. Call
// it first thing in main (cmd/loopd) and in TestMain of every package whose
// tests spawn confined sessions; otherwise it returns at once.
func MaybeRunLauncher() {
	if len(os.Args) >= 2 && os.Args[1] == FrontArg {
		os.Exit(runWorldFront(os.Args[2:]))
	}
	if len(os.Args) < 2 || os.Args[1] != LauncherArg {
		return
	}
	os.Exit(runLauncher(os.Args[2:]))
}

// exitLaunchFailed is the launcher's own failure (bad arguments, a policy
// it cannot apply, a target it cannot start), as env(1) uses 125.
const exitLaunchFailed = 125

func runLauncher(args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "loop sandbox: "+format+"\n", a...)
		return exitLaunchFailed
	}
	if len(args) < 2 {
		return fail("usage: %s POLICY [--detach|--keeper|--inner] -- argv...", LauncherArg)
	}
	enc, rest := args[0], args[1:]
	mode := ""
	if rest[0] != "--" {
		mode, rest = rest[0], rest[1:]
	}
	if len(rest) < 2 || rest[0] != "--" {
		return fail("usage: %s POLICY [--detach|--keeper|--inner] -- argv...", LauncherArg)
	}
	argv := rest[1:]
	p, err := DecodePolicy(enc)
	if err != nil {
		return fail("%v", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fail("finding the launcher's own executable: %v", err)
	}
	step := func(m string) *exec.Cmd {
		c := exec.Command(self, LauncherArg, enc, m, "--")
		c.Args = append(c.Args, argv...)
		return c
	}
	switch mode {
	case modeInner:
		return runInner(p, argv, fail)
	case modeDetach:
		return runFront(p, step(modeKeeper), fail)
	case modeKeeper:
		if p.Bridge != "" {
			// A world's keeper joins the world's loopback to loopd's
			// egress proxy for as long as the world lives.
			if err := runBridge(ProxyListen, p.Bridge); err != nil {
				return fail("the egress bridge: %v", err)
			}
		}
		return runOuter(step(modeInner), targetEnv(p), true, fail)
	case "":
		return runOuter(step(modeInner), targetEnv(p), false, fail)
	}
	return fail("unknown launcher mode %q", mode)
}

// targetEnv is the environment the target gets: the launcher's own (which
// loopd already allowlisted) filtered again through Env — BaseEnv, LC_*
// and the policy's names, never a secret — with TMPDIR pointed at the
// agent's temp dir.
func targetEnv(p Policy) []string {
	env := Env(os.Environ(), p.Env)
	if p.TempDir != "" {
		env = append(withoutVar(env, "TMPDIR"), "TMPDIR="+p.TempDir)
	}
	return env
}

func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// runInner applies the policy and becomes the target. Nothing of the
// launcher survives the exec: the target is the process tmux and the
// subreaper see.
func runInner(p Policy, argv []string, fail func(string, ...any) int) int {
	if err := p.apply(); err != nil {
		return fail("%v", err)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fail("%s: %v", argv[0], err)
	}
	// Filtered again at the last step (idempotent): whatever started this
	// launcher, the target gets only what the policy lets through.
	err = syscall.Exec(path, argv, targetEnv(p))
	return fail("running %s: %v", argv[0], err)
}

// runFront starts the keeper in a session of its own with the filtered
// environment and the caller's stdout/stderr, and exits with the target's
// status as soon as the keeper reports it on the pipe it passes as fd 3.
func runFront(p Policy, keeper *exec.Cmd, fail func(string, ...any) int) int {
	r, w, err := os.Pipe()
	if err != nil {
		return fail("status pipe: %v", err)
	}
	keeper.Env = targetEnv(p)
	keeper.Stdout, keeper.Stderr = os.Stdout, os.Stderr
	keeper.ExtraFiles = []*os.File{w}
	keeper.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := keeper.Start(); err != nil {
		return fail("starting the keeper: %v", err)
	}
	w.Close()
	var b [1]byte
	if n, _ := r.Read(b[:]); n == 1 {
		return int(b[0])
	}
	// The keeper died before the target finished: report how.
	if err := keeper.Wait(); err != nil {
		return fail("the keeper failed: %v", err)
	}
	return fail("the keeper exited without the target's status")
}

// runOuter is the unconfined parent: subreaper, signal relay, reaper.
// keeper reports the target's status on fd 3 and lets go of the caller's
// stdio before it waits for the rest.
func runOuter(inner *exec.Cmd, env []string, keeper bool, fail func(string, ...any) int) int {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail("becoming a child subreaper: %v", err)
	}
	inner.Env = env
	inner.Stdin, inner.Stdout, inner.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	if err := inner.Start(); err != nil {
		return fail("starting %s: %v", inner.Args[len(inner.Args)-1], err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = inner.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	_ = inner.Wait()
	close(done)
	code := exitCode(inner.ProcessState)
	if keeper {
		status := os.NewFile(3, "status")
		_, _ = status.Write([]byte{byte(code)})
		status.Close()
		if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
			for fd := 0; fd <= 2; fd++ {
				_ = unix.Dup2(int(null.Fd()), fd)
			}
			null.Close()
		}
	}
	reapAll()
	return code
}

// reapAll waits for every remaining child (orphans the subreaper adopted)
// until there is none.
func reapAll() {
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
	}
}

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return exitLaunchFailed
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
