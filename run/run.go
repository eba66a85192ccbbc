// Package run is theloop's one way to run another program (tmux, git, gh,
// the agent harness). Every package that starts a process takes a Runner, so
// tests can use the real program or a strict stub, and so that argv is
// always an explicit list — never a shell string.
//
// The package is public so that a program embedding theloop can pass its own
// Runner (one that audits, sandboxes or reroutes commands) to sessions,
// integrations and loop: Runner, Cmd, Result and ExitError are the whole
// contract, Exec is the os/exec implementation, and run/runtest holds a
// strict stub for tests.
package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Cmd describes one program invocation.
type Cmd struct {
	// Name is the program (looked up on PATH unless it contains a slash).
	Name string
	// Args are the arguments, passed verbatim (no shell).
	Args []string
	// Dir is the working directory ("" = the caller's).
	Dir string
	// Env holds extra KEY=VALUE entries added to the program's base
	// environment (Exec.Environ, by default the caller's environment
	// filtered through AllowedEnv); a later entry wins over an earlier one.
	// A program that needs a variable beyond BaseEnv gets it here,
	// explicitly (see Passthrough).
	Env []string
	// Stdin is fed to the program's standard input.
	Stdin []byte
	// Timeout kills the program after this long (0 = only ctx bounds it).
	Timeout time.Duration
}

// String renders the command for messages (arguments quoted when needed).
func (c Cmd) String() string {
	parts := []string{c.Name}
	for _, a := range c.Args {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`") {
			a = fmt.Sprintf("%q", a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// Result is what a finished program left behind.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
}

// ExitError reports a program that ran and exited non-zero.
type ExitError struct {
	Cmd    Cmd
	Result Result
}

func (e *ExitError) Error() string {
	msg := strings.TrimSpace(string(e.Result.Stderr))
	if len(msg) > 400 {
		msg = msg[:400] + "…"
	}
	if msg == "" {
		return fmt.Sprintf("%s: exit status %d", e.Cmd.Name, e.Result.ExitCode)
	}
	return fmt.Sprintf("%s: exit status %d: %s", e.Cmd.Name, e.Result.ExitCode, msg)
}

// Sentinel errors.
var (
	// ErrNotFound: the program is not installed (not on PATH).
	ErrNotFound = errors.New("program not found")
	// ErrTimeout: the program outlived its timeout and was killed.
	ErrTimeout = errors.New("program timed out")
)

// Runner runs programs. Run returns the result and a nil error on exit 0;
// an *ExitError on a non-zero exit (the Result is filled in too); an error
// wrapping ErrNotFound or ErrTimeout otherwise.
type Runner interface {
	Run(ctx context.Context, c Cmd) (Result, error)
}

// Exec runs real programs with os/exec.
//
// A program never inherits this process's environment by default: it
// starts from AllowedEnv(os.Environ(), nil) — PATH, HOME, the locale and
// the other BaseEnv names — plus Cmd.Env. A daemon's credentials therefore
// reach no child (and no child's /proc/<pid>/environ) unless a caller hands
// one over by name.
type Exec struct {
	// Environ, when set, is the environment programs start from (before
	// Cmd.Env is added) in place of the allowlisted one: InheritEnv for a
	// command-line tool acting for its own user, a wider allowlist for the
	// tmux server that carries a harness's variables.
	Environ func() []string
}

// environ is the environment of c.
func (e Exec) environ(c Cmd) []string {
	var base []string
	if e.Environ != nil {
		base = e.Environ()
	} else {
		base = AllowedEnv(os.Environ(), nil)
	}
	// Never nil: os/exec reads a nil Env as "inherit everything".
	env := make([]string, 0, len(base)+len(c.Env))
	return append(append(env, base...), c.Env...)
}

// Run implements Runner.
func (e Exec) Run(ctx context.Context, c Cmd) (Result, error) {
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	name := c.Name
	if c.Dir != "" && !filepath.IsAbs(name) && strings.ContainsRune(name, filepath.Separator) {
		// A relative path names a program in Dir (`tools/mdlint` run from
		// the repository root), as it would after `cd Dir`; LookPath alone
		// would look for it under this process's working directory.
		name = filepath.Join(c.Dir, name)
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return Result{ExitCode: -1}, fmt.Errorf("%s: %w", c.Name, ErrNotFound)
	}
	cmd := exec.CommandContext(ctx, path, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = e.environ(c)
	if c.Stdin != nil {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() == context.DeadlineExceeded {
		return res, fmt.Errorf("%s after %s: %w", c.Name, c.Timeout, ErrTimeout)
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return res, &ExitError{Cmd: c, Result: res}
		}
		return res, fmt.Errorf("running %s: %w", c.Name, err)
	}
	return res, nil
}

var _ Runner = Exec{}
