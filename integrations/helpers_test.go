package integrations

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph/graphtest"
)

// mapEnv is an injected environment.
type mapEnv map[string]string

func (m mapEnv) lookup(k string) (string, bool) {
	v, ok := m[k]
	return v, ok
}

// fakeSleeper records the waits it is asked for and advances the fake clock
// instead of sleeping, so backoff and rate-limit tests take no time.
type fakeSleeper struct {
	mu    sync.Mutex
	clock *graphtest.Clock
	waits []time.Duration
}

func (s *fakeSleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	s.clock.Advance(d)
	return ctx.Err()
}

func (s *fakeSleeper) recorded() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// world is a test's injected outside world.
type world struct {
	env   mapEnv
	sink  *graphtest.Sink
	clock *graphtest.Clock
	sleep *fakeSleeper
	// ghPath is what LookPath answers for "gh" ("" = not installed). With
	// realPath, LookPath uses the real default (go-gh's gh.Path).
	ghPath   string
	realPath bool
}

func newWorld(env mapEnv) *world {
	c := graphtest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	return &world{env: env, sink: &graphtest.Sink{}, clock: c, sleep: &fakeSleeper{clock: c}}
}

func (w *world) deps() Deps {
	d := Deps{Env: w.env.lookup, Sink: w.sink, Clock: w.clock, Sleep: w.sleep.sleep}
	if !w.realPath {
		d.LookPath = func(name string) (string, error) {
			if w.ghPath == "" {
				return "", errors.New("not found")
			}
			return w.ghPath, nil
		}
	}
	return d
}

func (w *world) set(t testing.TB, cfg Config) *Set {
	t.Helper()
	s, err := New(cfg, w.deps())
	require.NoError(t, err)
	return s
}

// apiSet returns a Set whose github provider uses the api transport against fg.
func apiSet(t testing.TB, fg *fakeGitHub, w *world) *Set {
	t.Helper()
	return w.set(t, Config{GitHub: &GitHubConfig{Transport: TransportAPI, API: GitHubAPIConfig{BaseURL: fg.URL()}}})
}

// requireKind asserts err is an *Error wrapping kind.
func requireKind(t testing.TB, err error, kind error) *Error {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, kind, "error: %v", err)
	var e *Error
	require.ErrorAs(t, err, &e)
	return e
}
