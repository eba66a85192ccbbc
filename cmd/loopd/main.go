// Command loopd is theloop's daemon: GitHub webhooks in, one agent session
// per work item in tmux, each node's assignment pasted in, human gates
// passed only by an authorized person's comment. The work is done by
// package loop/daemon; this binary maps flags and the environment onto it.
//
//	loopd run [--config FILE] [--state-root DIR] [--insecure-accept-unsigned]
//	loopd mcp [--config FILE]    # the MCP tools on stdio, for a harness
//	loopd --version
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/buildinfo"
	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
)

// version is stamped at build time: go build -ldflags "-X main.version=v1.2.3".
var version = ""

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1
	exitRefused = 2 // bad usage or configuration (no webhook secret, ...)
	// exitRestart (EX_TEMPFAIL): the queue's store failed a write (a full
	// disk) and has room again; the service manager's restart reopens it.
	exitRestart = 75
)

// env is the outside world a verb may use. Tests build their own.
type env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	LookupEnv      func(string) (string, bool)
	Getwd          func() (string, error)
	HomeDir        func() (string, error)
	// Context is cancelled on SIGINT/SIGTERM.
	Context func() (context.Context, context.CancelFunc)
	// Stdin feeds `loopd mcp` (nil: none).
	Stdin io.Reader
	// Clock is `loopd mcp`'s time (nil: the wall clock).
	Clock graph.Clock
	// Integrations builds `loopd mcp`'s integrations from the CLI config's
	// section (nil: integrations.Optional over the process environment).
	Integrations func(raw map[string]any, sink graph.Sink) (graph.Integrations, []string, error)
	// Exec replaces the process with argv (a restart, restart.go); it
	// returns only on failure. Nil: a restart exits with exitRestart for a
	// supervisor to start loopd again.
	Exec func(argv []string) error
}

func (e *env) clock() graph.Clock {
	if e.Clock == nil {
		return graph.SystemClock{}
	}
	return e.Clock
}

func (e *env) stdin() io.Reader {
	if e.Stdin == nil {
		return strings.NewReader("")
	}
	return e.Stdin
}

func systemEnv() *env {
	return &env{
		Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin,
		Getenv: os.Getenv, LookupEnv: os.LookupEnv, Getwd: os.Getwd, HomeDir: os.UserHomeDir,
		Context: signalContext,
		Exec:    execSelf,
	}
}

// signalContext ends on SIGINT or SIGTERM with the signal as its cause,
// so loopd's last line says what stopped it ("stopped: asked to stop:
// received terminated").
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			cancel(fmt.Errorf("received %v", sig))
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			cancel(context.Canceled)
		})
	}
}

// exitError carries an exit code and a message for stderr.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// commands lists loopd's verbs, one per line. `loopd demo` (cmd/loopd/demo.go)
// adds itself here with one line: demoCommand(e).
func commands(e *env) []*cli.Command {
	return []*cli.Command{
		runCommand(e),
		demoCommand(e),
		mcpCommand(e),
	}
}

func newApp(e *env) *cli.App {
	return &cli.App{
		Name:            "loopd",
		Usage:           "theloop's daemon: GitHub activity in, one agent session per work item, walked through the-loop's graph",
		Version:         buildinfo.Version(version),
		Writer:          e.Stdout,
		ErrWriter:       e.Stderr,
		HideHelpCommand: true,
		Commands:        commands(e),
		ExitErrHandler:  func(*cli.Context, error) {},
	}
}

// Main runs loopd with args and returns the exit code.
func Main(args []string, e *env) int {
	err := newApp(e).Run(args)
	if err == nil {
		return exitOK
	}
	var re *restartError
	if errors.As(err, &re) {
		return restart(e, args, re.withUpgrade)
	}
	var xe *exitError
	if errors.As(err, &xe) {
		if xe.msg != "" {
			fmt.Fprintln(e.Stderr, "loopd:", xe.msg)
		}
		return xe.code
	}
	fmt.Fprintln(e.Stderr, "loopd:", err)
	return exitFailed
}

func main() {
	// loopd's executable is also the agent sandbox's launcher: started as
	// `loopd __loop-sandbox-exec POLICY -- argv`, it confines argv and
	// never returns here.
	sandbox.MaybeRunLauncher()
	// Before anything reads a secret: non-dumpable, and the environment
	// block /proc/<pid>/environ shows is zeroed (docs/decisions.md §18).
	if err := sandbox.Harden(); err != nil {
		fmt.Fprintf(os.Stderr, "loopd: warning: %v\n", err)
	}
	os.Exit(Main(os.Args, systemEnv()))
}
