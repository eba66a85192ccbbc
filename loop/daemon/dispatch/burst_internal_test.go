package dispatch

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// meterRun feeds a burstMeter windows of the given length, each with rate
// webhooks a second arriving and waiting of them, on average, waiting for
// the store; it returns the windows after which a burst started or ended.
type meterRun struct {
	m          burstMeter
	now        time.Time
	puts, wait uint64
}

func newMeterRun() *meterRun {
	r := &meterRun{m: burstMeter{waitingAt: 2}, now: time.Unix(1, 0)} // any instant: the meter reads only differences
	r.m.update(r.now, 0, 0)
	return r
}

// window advances by d with rate puts/s and waiting webhooks waiting, and
// reports whether the burst flag changed.
func (r *meterRun) window(d time.Duration, rate, waiting float64) bool {
	r.now = r.now.Add(d)
	r.puts += uint64(rate * d.Seconds())
	r.wait += uint64(waiting * float64(d))
	return r.m.update(r.now, r.puts, r.wait)
}

func TestBurstMeterPacesOnlyAReceiverShortOfCores(t *testing.T) {
	t.Run("saturated receiver", func(t *testing.T) {
		r := newMeterRun()
		changes, at := 0, -1
		for i := range 20 { // 100 ms of 8,000 webhooks/s, 5 waiting
			if r.window(5*time.Millisecond, 8000, 5) {
				changes++
				at = i
			}
		}
		require.True(t, r.m.burst)
		require.Equal(t, 1, changes, "the burst starts once")
		require.Less(t, at, 8, "and within 40 ms (smoothing over %v)", burstSmoothing)

		// One stalled window (a collection, a slow write) does not end it.
		require.False(t, r.window(5*time.Millisecond, 0, 0))
		require.True(t, r.m.burst)

		// A pause of the dispatcher's, measured when it ends: the receiver
		// still busy keeps the burst on; quiet ends it.
		require.False(t, r.window(DefaultBurstPause, 8000, 5))
		require.True(t, r.window(DefaultBurstPause, 0, 0), "a quiet pause ends the burst")
		require.False(t, r.m.burst)
	})
	t.Run("many webhooks, cores to spare", func(t *testing.T) {
		r := newMeterRun()
		for range 200 { // a second of 8,000 webhooks/s, 1 waiting
			require.False(t, r.window(5*time.Millisecond, 8000, 1))
		}
	})
	t.Run("slow store, few webhooks", func(t *testing.T) {
		r := newMeterRun()
		for range 200 { // 50 webhooks/s, each waiting 100 ms: 5 waiting
			require.False(t, r.window(5*time.Millisecond, 50, 5))
		}
	})
	t.Run("lone event after a quiet spell", func(t *testing.T) {
		r := newMeterRun()
		require.False(t, r.window(10*time.Second, 0.1, 0.001))
		require.False(t, r.m.burst)
	})
	t.Run("short windows are not closed", func(t *testing.T) {
		r := newMeterRun()
		start := r.m.at
		for range 4 {
			r.window(time.Millisecond, 100000, 50)
			require.Equal(t, start, r.m.at, "a window shorter than %v stays open", burstWindow)
			require.Zero(t, r.m.rate)
		}
		r.window(time.Millisecond, 100000, 50)
		require.Equal(t, r.now, r.m.at, "it closes once it spans %v", burstWindow)
		require.InDelta(t, 100000*(1-math.Exp(-0.1)), r.m.rate, 1, "the whole window counts")
	})
	t.Run("a new queue restarts the window", func(t *testing.T) {
		r := newMeterRun()
		r.window(5*time.Millisecond, 8000, 5)
		r.puts, r.wait = 0, 0
		require.False(t, r.window(5*time.Millisecond, 0, 0))
		require.False(t, r.m.burst)
	})
}
