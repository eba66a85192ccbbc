package daemon

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// The liveness watch's bookkeeping, on stand-ins for the registry, tmux and
// the manager (the real ones are in TestLivenessWatchRespawnsKilledHarness):
// back-off, the cap per window, one escalation, and the sessions it must
// leave alone.

type fakeLiveWorld struct {
	mu       sync.Mutex
	failPost int // add-comment calls to fail
	recs     []sessions.Record
	liveness map[string]sessions.Liveness
	respawns []string
	calls    []graph.Operation
	events   []string
}

func (f *fakeLiveWorld) List() ([]sessions.Record, []error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sessions.Record(nil), f.recs...), nil
}

func (f *fakeLiveWorld) Probe(_ context.Context, name string) (sessions.Liveness, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.liveness[name], nil
}

func (f *fakeLiveWorld) Respawn(_ context.Context, item workitem.Ref, prompt string) (sessions.RespawnResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.respawns = append(f.respawns, item.String())
	return sessions.RespawnResult{Record: sessions.Record{Item: item, SessionID: "s"}, Resumed: true}, nil
}

func (f *fakeLiveWorld) Call(_ context.Context, op graph.Operation, _ map[string]any) (map[string]any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op)
	if op == "github.add-comment" && f.failPost > 0 {
		f.failPost--
		return nil, errors.New("github is down")
	}
	return map[string]any{}, nil
}

func TestLivenessWatchBackoffCapAndEscalation(t *testing.T) {
	item := func(n string) workitem.Ref {
		r, err := workitem.Parse("github:octo/demo#" + n)
		require.NoError(t, err)
		return r
	}
	active, paused, closed, foreign := item("1"), item("2"), item("3"), item("4")
	f := &fakeLiveWorld{liveness: map[string]sessions.Liveness{}}
	for _, r := range []struct {
		it workitem.Ref
		st sessions.Status
	}{{active, sessions.StatusActive}, {paused, sessions.StatusPaused}, {closed, sessions.StatusClosed}, {foreign, sessions.StatusActive}} {
		name := sessions.TmuxName(r.it)
		f.recs = append(f.recs, sessions.Record{Item: r.it, TmuxName: name, SessionID: "s", Status: r.st})
		f.liveness[name] = sessions.LivenessDead
	}
	clock := graphtest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	w := mustLivenessWatch(t, LivenessConfig{MaxRespawns: 3, Window: 30 * time.Minute, Backoff: 5 * time.Second}, livenessDeps{
		Registry: f, Tmux: f, Manager: f, Integrations: f, Clock: clock,
		Owns: func(_ context.Context, it workitem.Ref) bool { return it != foreign },
		Record: func(name string, _ graph.Level, _ ...graph.Field) {
			f.mu.Lock()
			f.events = append(f.events, name)
			f.mu.Unlock()
		},
	})
	ctx := context.Background()
	count := func(name string) int {
		n := 0
		for _, e := range f.events {
			if e == name {
				n++
			}
		}
		return n
	}

	w.check(ctx)
	require.Equal(t, []string{active.String()}, f.respawns, "only the active session this node owns is respawned")
	w.check(ctx)
	require.Len(t, f.respawns, 1, "within the back-off nothing more happens")
	clock.Advance(5 * time.Second)
	w.check(ctx)
	require.Len(t, f.respawns, 2, "after the back-off: the second respawn")
	clock.Advance(5 * time.Second)
	w.check(ctx)
	require.Len(t, f.respawns, 2, "the back-off doubled (10 s)")
	clock.Advance(5 * time.Second)
	w.check(ctx)
	require.Len(t, f.respawns, 3)
	f.failPost = 1 // GitHub fails the first escalation comment
	clock.Advance(time.Minute)
	w.check(ctx)
	require.Equal(t, 1, count("session.liveness_escalation_failed"))
	w.check(ctx)
	clock.Advance(time.Minute)
	w.check(ctx)
	require.Len(t, f.respawns, 3, "the cap holds")
	require.Equal(t, 3, count("session.liveness_respawned"))
	require.Equal(t, 1, count("session.liveness_gave_up"), "gave up once")
	require.Equal(t, 1, count("session.liveness_escalated"), "escalated once")
	require.Equal(t, []graph.Operation{"github.add-comment", "github.add-comment", "github.set-labels"}, f.calls, "the failed comment retried on the next tick; then one label")

	// Someone's event brought it back: the count starts afresh.
	f.liveness[sessions.TmuxName(active)] = sessions.LivenessLive
	w.check(ctx)
	f.liveness[sessions.TmuxName(active)] = sessions.LivenessAbsent
	w.check(ctx)
	require.Len(t, f.respawns, 4, "an absent session is respawned too")

	// Unknown liveness is never respawned over.
	f.liveness[sessions.TmuxName(active)] = sessions.LivenessUnknown
	clock.Advance(time.Hour)
	w.check(ctx)
	require.Len(t, f.respawns, 4)
}

// Close stops a started watch, and is safe twice and on a watch never
// started.
func TestLivenessWatchClose(t *testing.T) {
	f := &fakeLiveWorld{liveness: map[string]sessions.Liveness{}}
	ticks := make(chan time.Time)
	w := mustLivenessWatch(t, LivenessConfig{}, livenessDeps{Registry: f, Tmux: f, Manager: f, Clock: graph.SystemClock{},
		Tick: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }})
	w.Start()
	ticks <- time.Time{} // a pass runs
	require.NoError(t, w.Close())
	require.NoError(t, w.Close())
	require.NoError(t, mustLivenessWatch(t, LivenessConfig{}, livenessDeps{Registry: f, Tmux: f, Manager: f, Clock: graph.SystemClock{}}).Close())
}

// With GitHub refusing every call, a session the watch gave up on costs one
// escalation attempt per back-off (30 s doubling), not one per tick.
func TestLivenessEscalationBacksOff(t *testing.T) {
	it, err := workitem.Parse("github:octo/demo#1")
	require.NoError(t, err)
	name := sessions.TmuxName(it)
	f := &fakeLiveWorld{liveness: map[string]sessions.Liveness{name: sessions.LivenessDead}, failPost: 1 << 30,
		recs: []sessions.Record{{Item: it, TmuxName: name, SessionID: "s", Status: sessions.StatusActive}}}
	clock := graphtest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	w := mustLivenessWatch(t, LivenessConfig{MaxRespawns: 1, Window: time.Hour, Backoff: time.Second}, livenessDeps{
		Registry: f, Tmux: f, Manager: f, Integrations: f, Clock: clock})
	ctx := context.Background()
	w.check(ctx) // the one respawn
	clock.Advance(time.Second)
	ticks := 0
	for end := clock.Now().Add(10 * time.Minute); clock.Now().Before(end); clock.Advance(2 * time.Second) {
		w.check(ctx) // gives up, then retries the comment
		ticks++
	}
	comments := 0
	for _, c := range f.calls {
		if c == "github.add-comment" {
			comments++
		}
	}
	t.Logf("%d ticks over 10 min, %d escalation attempts", ticks, comments)
	require.Equal(t, 300, ticks)
	require.LessOrEqual(t, comments, 6, "30 s, 1, 2, 4, 8 min: one attempt per back-off")
	require.GreaterOrEqual(t, comments, 4)
}

// blockingRespawner holds every respawn until released, counting those in
// flight.
type blockingRespawner struct {
	mu            sync.Mutex
	inFlight, max int
	started       chan struct{}
	release       chan struct{}
}

func (b *blockingRespawner) Respawn(ctx context.Context, item workitem.Ref, _ string) (sessions.RespawnResult, error) {
	b.mu.Lock()
	b.inFlight++
	b.max = max(b.max, b.inFlight)
	b.mu.Unlock()
	b.started <- struct{}{}
	<-b.release
	b.mu.Lock()
	b.inFlight--
	b.mu.Unlock()
	return sessions.RespawnResult{Record: sessions.Record{Item: item, SessionID: "s"}}, nil
}

// A thousand dead sessions: never more than MaxInFlight respawns at once;
// a session met while every slot is taken waits for a later pass.
func TestLivenessRespawnsBoundedInFlight(t *testing.T) {
	f := &fakeLiveWorld{liveness: map[string]sessions.Liveness{}}
	for n := 1; n <= 1000; n++ {
		it, err := workitem.Parse("github:octo/demo#" + strconv.Itoa(n))
		require.NoError(t, err)
		name := sessions.TmuxName(it)
		f.recs = append(f.recs, sessions.Record{Item: it, TmuxName: name, SessionID: "s", Status: sessions.StatusActive})
		f.liveness[name] = sessions.LivenessAbsent
	}
	b := &blockingRespawner{started: make(chan struct{}, 4000), release: make(chan struct{})}
	w := mustLivenessWatch(t, LivenessConfig{MaxInFlight: 3, Backoff: time.Hour}, livenessDeps{Registry: f, Tmux: f, Manager: b, Integrations: f, Clock: graph.SystemClock{}})
	done := make(chan struct{})
	go func() { w.check(context.Background()); close(done) }()
	for range 3 {
		<-b.started
	}
	close(b.release) // from now on respawns return at once
	<-done
	passes := 1
	for ; len(b.started) < 997 && passes < 1000; passes++ {
		w.check(context.Background())
	}
	require.Equal(t, 3, b.max, "never more than three in flight")
	require.Len(t, b.started, 997, "every session respawned once, over %d passes", passes)
}

func mustLivenessWatch(t testing.TB, cfg LivenessConfig, deps livenessDeps) *livenessWatch {
	t.Helper()
	w, err := newLivenessWatch(cfg, deps)
	require.NoError(t, err)
	return w
}
