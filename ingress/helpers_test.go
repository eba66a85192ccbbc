package ingress

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
)

// fixtureDir holds GitHub's published example payloads (octokit/webhooks).
const fixtureDir = "../../shared/fixtures/github-webhooks"

// fixture reads one example payload, skipping the test when the shared
// fixtures are not beside the repository.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, name))
	if os.IsNotExist(err) {
		t.Skipf("GitHub webhook fixtures not found at %s (they live in the shared folder beside the repository); skipping", fixtureDir)
	}
	require.NoError(t, err)
	return b
}

// mutate decodes a payload, applies f and re-encodes it.
func mutate(t testing.TB, b []byte, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	f(m)
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return out
}

// obj walks nested maps, creating them.
func obj(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		n, ok := m[k].(map[string]any)
		if !ok {
			n = map[string]any{}
			m[k] = n
		}
		m = n
	}
	return m
}

// memSink is an in-memory Sink that dedups on DeliveryID like the
// daemon's queue. down makes it answer ErrUnavailable.
type memSink struct {
	mu     sync.Mutex
	events []*Event
	ids    map[string]bool
	down   bool
	delay  time.Duration
}

func newMemSink() *memSink { return &memSink{ids: map[string]bool{}} }

func (s *memSink) Put(ctx context.Context, ev *Event) error {
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return ErrUnavailable
	}
	if s.ids[ev.DeliveryID] {
		return ErrDuplicate
	}
	s.ids[ev.DeliveryID] = true
	s.events = append(s.events, ev)
	return nil
}

func (s *memSink) setDown(d bool) {
	s.mu.Lock()
	s.down = d
	s.mu.Unlock()
}

func (s *memSink) all() []*Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Event(nil), s.events...)
}

// logSink records LogEvents.
type logSink struct {
	mu     sync.Mutex
	events []graph.LogEvent
}

func (l *logSink) Emit(e graph.LogEvent) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *logSink) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		out = append(out, e.Name)
	}
	return out
}

// testConfig is a config bound to the fixtures' repository with their
// author authorized.
func testConfig() Config {
	c := DefaultConfig()
	c.Secret = []byte("s3cret")
	c.Repositories = []string{"Codertocat/Hello-World", "octo/repo", "ghe.example.com/corp/app"}
	c.AuthorizedUsers = []string{"Codertocat", "alice"}
	return c
}
