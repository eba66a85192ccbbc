// Package install puts theloop's agent side where each harness looks for
// it: the Claude Code plugin in a local marketplace and the settings that
// enable it, Cursor's stop hook and rule. It edits the harness's JSON
// keeping every byte it does not have to change, refuses a file that is not
// valid JSON, and undoes exactly what it wrote.
//
// It is the logic behind `loopctl install` and `loopctl uninstall`; the
// command line only maps flags into Options. It links nothing of the
// daemon: std, package plugin, run and internal helpers.
package install

import (
	"fmt"
	"io"
)

// IOStreams are where Install and Uninstall report.
type IOStreams struct {
	Out    io.Writer
	ErrOut io.Writer
}

// Env is the outside world an installation reads: the environment (PATH,
// XDG_DATA_HOME), the working directory and the home directory.
type Env struct {
	Getenv  func(string) string
	Getwd   func() (string, error)
	HomeDir func() (string, error)
}

// Exit codes an Error carries, as loopctl maps them.
const (
	exitFailed  = 1 // a file could not be read, parsed or written
	exitRefused = 2 // bad usage: a harness, scope or command it cannot use
)

// Error is a failure the command line reports as it is: Code 2 for a
// refused request (bad flags), 1 for one that failed (a file it cannot
// read, parse or write).
type Error struct {
	Code int
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func failWith(code int, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}
