package daemon

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/workitem"
)

// titleStandIn answers GitHub's get-issue after release is closed,
// counting the calls in flight.
type titleStandIn struct {
	release  chan struct{}
	inFlight atomic.Int32
	most     atomic.Int32
	calls    atomic.Int32
}

func (f *titleStandIn) Call(ctx context.Context, op graph.Operation, params map[string]any) (map[string]any, error) {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for m := f.most.Load(); n > m && !f.most.CompareAndSwap(m, n); m = f.most.Load() {
	}
	f.calls.Add(1)
	select {
	case <-f.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return map[string]any{"title": "title of " + params["ref"].(string)}, nil
}

// The board asks for every tracked item's title; a daemon holding many
// items fetches them a few at a time, each once, not all at once.
func TestDashboardFetchesTitlesAFewAtATime(t *testing.T) {
	f := &titleStandIn{release: make(chan struct{})}
	s := newDashSource(&Daemon{integ: f})
	defer s.close()
	const items = 200
	refs := make([]workitem.Ref, items)
	for i := range refs {
		ref, err := workitem.Parse(fmt.Sprintf("github:octo/demo#%d", i+1))
		require.NoError(t, err)
		refs[i] = ref
	}
	for range 3 { // the board refreshes while the first fetches wait
		for _, ref := range refs {
			require.Empty(t, s.title(ref))
		}
	}
	require.Eventually(t, func() bool { return f.inFlight.Load() == maxTitleFetches }, 10*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	require.Equal(t, int32(maxTitleFetches), f.most.Load(), "at most %d fetches at once", maxTitleFetches)

	close(f.release)
	require.Eventually(t, func() bool {
		for _, ref := range refs {
			if s.title(ref) != "title of "+ref.String() {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "every title arrives")
	require.Equal(t, int32(items), f.calls.Load(), "each title fetched once")
	require.LessOrEqual(t, f.most.Load(), int32(maxTitleFetches))
	s.mu.Lock()
	require.Zero(t, s.titleWorkers, "the fetchers stop when the queue is empty")
	s.mu.Unlock()
}

// Closing the dashboard while titles wait returns once the running
// fetches are cancelled; the queued ones are dropped, not fetched.
func TestDashboardCloseDropsQueuedTitles(t *testing.T) {
	f := &titleStandIn{release: make(chan struct{})}
	s := newDashSource(&Daemon{integ: f})
	for i := range 50 {
		ref, err := workitem.Parse(fmt.Sprintf("github:octo/demo#%d", i+1))
		require.NoError(t, err)
		s.title(ref)
	}
	require.Eventually(t, func() bool { return f.inFlight.Load() == maxTitleFetches }, 10*time.Second, time.Millisecond)
	done := make(chan struct{})
	go func() { s.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return")
	}
	require.Equal(t, int32(maxTitleFetches), f.calls.Load(), "no queued title is fetched after close")
}
