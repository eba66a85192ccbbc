// Package runtest holds a strict stub of run.Runner for tests, ours and
// embedders'. It lives apart from package run so that binaries do not link
// package testing.
package runtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/theloop-dev/theloop/run"
)

// Stub is a strict run.Runner for tests: every call must match a registered
// expectation (in any order), and Verify fails the test for expectations
// never used. Prefer the real program where it is cheap (git, tmux).
type Stub struct {
	t     testing.TB
	mu    sync.Mutex
	stubs []*stubEntry
	calls []run.Cmd
}

type stubEntry struct {
	prefix string
	res    run.Result
	err    error
	used   int
}

// NewStub returns a Stub bound to t; Verify runs at cleanup.
func NewStub(t testing.TB) *Stub {
	s := &Stub{t: t}
	t.Cleanup(s.Verify)
	return s
}

// Register answers calls whose "name arg1 arg2..." starts with prefix.
func (s *Stub) Register(prefix string, res run.Result, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stubs = append(s.stubs, &stubEntry{prefix: prefix, res: res, err: err})
}

// Run implements run.Runner.
func (s *Stub) Run(_ context.Context, c run.Cmd) (run.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
	line := strings.Join(append([]string{c.Name}, c.Args...), " ")
	for _, e := range s.stubs {
		if strings.HasPrefix(line, e.prefix) {
			e.used++
			return e.res, e.err
		}
	}
	s.t.Errorf("run.Stub: unexpected command: %s", line)
	return run.Result{ExitCode: -1}, fmt.Errorf("unexpected command: %s", line)
}

// Calls returns every command run so far.
func (s *Stub) Calls() []run.Cmd {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]run.Cmd(nil), s.calls...)
}

// Verify fails the test for registered expectations that never matched.
func (s *Stub) Verify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.stubs {
		if e.used == 0 {
			s.t.Errorf("run.Stub: expected command never ran: %s", e.prefix)
		}
	}
}
