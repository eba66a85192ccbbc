package daemon

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
)

// The reactor posts an event's started reaction, then its closing one, in
// that order; an event that finds every slot taken gets none and is
// reported; close abandons what waits and returns.
func TestReactorOrderBoundAndClose(t *testing.T) {
	var mu sync.Mutex
	var posted []string
	var reports []string
	rc := newReactor(2, func(name string, _ graph.Level, _ ...graph.Field) {
		mu.Lock()
		reports = append(reports, name)
		mu.Unlock()
	}, time.Now)
	post := func(tag string) func(context.Context, string) {
		return func(ctx context.Context, content string) {
			require.NoError(t, ctx.Err())
			mu.Lock()
			posted = append(posted, tag+":"+content)
			mu.Unlock()
		}
	}
	a := rc.start("eyes", post("a"))
	b := rc.start("", post("b"))
	require.NotNil(t, a)
	require.NotNil(t, b)
	require.Nil(t, rc.start("eyes", post("c")), "no slot: no reactions")
	a.finish("hooray")
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(posted) == 2
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"a:eyes", "a:hooray"}, posted)
	require.Equal(t, []string{"reaction.skipped"}, reports)
	require.Eventually(t, func() bool { return rc.start("", post("d")) != nil }, 10*time.Second, 5*time.Millisecond,
		"a's slot comes back")
	rc.close() // b and d wait for a closing reaction that never comes
	require.Nil(t, rc.start("eyes", post("e")), "closed")
	var nilReaction *reaction
	nilReaction.finish("hooray") // an event without a slot finishes as any other
}
