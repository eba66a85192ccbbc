package sessions

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The figure: how long from Manager.Spawn being called until the first
// prompt's receipt is in, with the fake harness and production timings
// (DefaultTmuxConfig; only the tmux server is private). Most of it is
// ReadySettle — the pane must show a steady screen before a paste — so the
// figure moves with that setting. Nothing here asserts a time: shared
// machines are noisy.

func productionTimings(c *TmuxConfig) {
	d := DefaultTmuxConfig()
	c.Width, c.Height = d.Width, d.Height
	c.ReadySettle, c.PollInterval = d.ReadySettle, d.PollInterval
	c.ReadyTimeout, c.ReceiptTimeout = d.ReadyTimeout, d.ReceiptTimeout
}

// spawnToFirstDelivery spawns work item #n with a prompt, returns how long
// that took, and closes the session again.
func spawnToFirstDelivery(t testing.TB, f *managerFixture, n int) time.Duration {
	t.Helper()
	ctx := context.Background()
	item := mustItem(t, fmt.Sprintf("github:octo/repo#%d", n))
	cwd := t.TempDir()
	start := time.Now()
	res, err := f.m.Spawn(ctx, SpawnRequest{Item: item, Cwd: cwd, Prompt: "Start the-loop on " + item.String()})
	elapsed := time.Since(start)
	require.NoError(t, err)
	require.True(t, res.Receipt.Verified(), "%+v", res.Receipt)
	require.NoError(t, f.m.Close(ctx, item, false))
	return elapsed
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkSpawnToFirstDelivery reports the median (median-ms), fastest
// and slowest spawn-to-first-delivery time besides the mean (ns/op). The
// figure is the median of 20:
//
//	go test -run '^$' -bench SpawnToFirstDelivery -benchtime 20x ./sessions/
//
// It is a benchmark, not a test, so `go test` does not pay for 20 spawns.
func BenchmarkSpawnToFirstDelivery(b *testing.B) {
	f := newManagerFixtureWith(b, true, productionTimings, nil)
	var ds []time.Duration
	n := 0
	for b.Loop() {
		n++
		ds = append(ds, spawnToFirstDelivery(b, f, n))
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	b.ReportMetric(float64(median(ds).Microseconds())/1000, "median-ms")
	b.ReportMetric(float64(s[0].Microseconds())/1000, "min-ms")
	b.ReportMetric(float64(s[len(s)-1].Microseconds())/1000, "max-ms")
}
