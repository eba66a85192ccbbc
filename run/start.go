package run

import (
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"
)

// Starter starts a program that keeps running while its caller talks to it
// over the program's standard input and output — tmux's control mode, one
// client kept open instead of a tmux process per command. A Runner that
// also implements Starter lets its callers keep such a program; one that
// does not is used for one-shot commands only (callers must work either
// way). The program is started with the environment Run would give it.
type Starter interface {
	Start(c Cmd) (*Process, error)
}

// Process is a program started by a Starter.
type Process struct {
	// Stdin is the program's standard input.
	Stdin io.WriteCloser
	// Stdout is the program's standard output; it reaches EOF when the
	// program exits.
	Stdout io.Reader
	// Stop ends the program: it closes Stdin, kills the program if it has
	// not exited after a short grace, and waits for it. It is safe to call
	// more than once and from several goroutines.
	Stop func()
}

// stopGrace is how long Stop lets a program exit on its own after its
// standard input closed.
const stopGrace = 500 * time.Millisecond

// Start implements Starter. Cmd.Timeout and Cmd.Stdin do not apply (the
// program runs until Stop); standard error is discarded.
func (e Exec) Start(c Cmd) (*Process, error) {
	path, err := exec.LookPath(c.Name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, ErrNotFound)
	}
	cmd := exec.Command(path, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = e.environ(c)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", c.Name, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", c.Name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", c.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		// The process, not cmd.Wait: Wait would close stdout under a
		// reader that has not drained it (Stop closes it).
		_, _ = cmd.Process.Wait()
		close(exited)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = stdin.Close()
			select {
			case <-exited:
			case <-time.After(stopGrace):
				_ = cmd.Process.Kill()
				<-exited
			}
			_ = stdout.Close()
		})
	}
	return &Process{Stdin: stdin, Stdout: stdout, Stop: stop}, nil
}

var _ Starter = Exec{}
