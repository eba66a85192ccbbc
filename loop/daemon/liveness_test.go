package daemon_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/sessions"
)

// livenessRespawns is the times of the watch's respawns so far.
func (w *world) livenessRespawns() []time.Time {
	var out []time.Time
	for _, o := range w.observed(daemon.KindSpawn, "session.liveness_respawned") {
		out = append(out, o.Time)
	}
	return out
}

// paneLive reports whether item n's tmux pane runs a process.
func (w *world) paneLive(n int) bool {
	out, err := exec.Command("tmux", "-S", w.socket, "list-panes", "-t", "="+sessions.TmuxName(w.item(n))+":", "-F", "#{pane_dead}").Output()
	return err == nil && strings.TrimSpace(string(out)) == "0"
}

// counter is the value of a counter of /metrics (summed over the series
// whose labels include want).
func (w *world) counter(name string, want map[string]string) float64 {
	fams, err := w.d.Metrics().Registry().Gather()
	require.NoError(w.t, err)
	sum := 0.0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.Metric {
			for k, v := range want {
				ok := false
				for _, l := range m.Label {
					ok = ok || (l.GetName() == k && l.GetValue() == v)
				}
				if !ok {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// A harness killed in its pane is resumed by the liveness watch with no
// event at all; killed again and again it is respawned up to the cap, then
// the watch gives up and escalates once on the ticket. Counted in /metrics.
func TestLivenessWatchRespawnsKilledHarness(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) {
		landlockOnly(c)
		c.Liveness = daemon.LivenessConfig{Interval: 200 * time.Millisecond, MaxRespawns: 3, Window: time.Hour, Backoff: time.Millisecond}
	})
	n := w.openLabeled()
	w.waitIdle()
	w.eventually("the session to run", func() bool { return w.paneLive(n) })

	// Each death is one respawn attempt; an attempt can fail (the resumed
	// harness died while its prompt was delivered) and the next tick tries
	// again, which counts against the same cap.
	attempts := func() int { return w.count("session.liveness_respawned") + w.count("session.liveness_respawn_failed") }
	for kills := 0; w.count("session.liveness_gave_up") == 0; kills++ {
		require.Less(t, kills, 6, "the cap of 3 attempts ends it")
		before := len(w.livenessRespawns())
		w.killHarness(n)
		w.eventually("the watch to respawn the session or give up", func() bool {
			return len(w.livenessRespawns()) > before && w.paneLive(n) || w.count("session.liveness_gave_up") > 0
		})
	}
	require.Equal(t, 3, attempts(), "three respawn attempts, then the watch gave up\n%s", w.eventNames())
	require.Contains(t, w.received(), "loopd restarted it", "the resumed conversation is told what happened")
	require.Contains(t, w.received(), "The node you are at and its assignment", "and given its node's assignment")
	require.Equal(t, 1, w.spawns(), "the conversation was resumed each time, never started afresh")
	require.Equal(t, float64(len(w.livenessRespawns())), w.counter("theloop_sessions_respawned_total", map[string]string{"cause": "liveness", "how": "resumed"}))
	require.GreaterOrEqual(t, len(w.livenessRespawns()), 1)

	w.eventually("the escalation on the ticket", func() bool {
		is, err := w.sim.Issue(repoFull, n)
		require.NoError(t, err)
		return slices.Contains(is.Labels, "loop:escalated")
	})
	comments, err := w.sim.Comments(repoFull, n)
	require.NoError(t, err)
	escalations := 0
	for _, c := range comments {
		if strings.Contains(c.Body, "the agent's session keeps dying") {
			escalations++
		}
	}
	require.Equal(t, 1, escalations, "one marked comment")
	// Many more ticks: still given up, still one escalation.
	time.Sleep(time.Second)
	require.Equal(t, 3, attempts())
	require.Equal(t, 1, w.count("session.liveness_gave_up"))
	require.False(t, w.paneLive(n))
	require.Equal(t, 1.0, w.counter("theloop_sessions_respawn_gave_up_total", nil))
}

// A paused session that dies stays dead: the watch respawns only active
// sessions.
func TestLivenessWatchLeavesPausedSessionDead(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) {
		landlockOnly(c)
		c.Liveness = daemon.LivenessConfig{Interval: 100 * time.Millisecond, Backoff: time.Millisecond}
	})
	n := w.openLabeled()
	w.waitIdle()
	_, err := w.sim.Comment(repoFull, n, human, "the-loop pause")
	require.NoError(t, err)
	w.waitIdle()
	w.eventually("the pause to be recorded", func() bool {
		reg, err := sessions.OpenRegistry(sessions.RegistryDir(w.cfg.StateRoot))
		require.NoError(t, err)
		rec, err := reg.Get(w.item(n))
		return err == nil && rec.Status == sessions.StatusPaused
	})
	w.killHarness(n)
	time.Sleep(time.Second) // ten ticks
	require.Empty(t, w.livenessRespawns())
	require.False(t, w.paneLive(n))
}

// BenchmarkLivenessRespawn measures the time from a harness's death (the
// kill) to its resumed session (the watch's session.liveness_respawned),
// over 10 kills per iteration, with the shipped interval (2 s) and resume
// probe: run with -bench LivenessRespawn -benchtime 1x.
func BenchmarkLivenessRespawn(b *testing.B) {
	w := newWorld(b, func(c *daemon.Config) {
		landlockOnly(c) // killHarness and paneLive drive loopd's own tmux server
		c.Liveness = daemon.LivenessConfig{MaxRespawns: 1000, Backoff: time.Millisecond}
	})
	n := w.openLabeled()
	w.waitIdle()
	w.eventually("the session to run", func() bool { return w.paneLive(n) })
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		for range 10 {
			before := len(w.livenessRespawns())
			killed := time.Now()
			w.killHarness(n)
			w.eventually("the watch to respawn the session", func() bool { return len(w.livenessRespawns()) > before && w.paneLive(n) })
			took = append(took, w.livenessRespawns()[before].Sub(killed))
		}
	}
	b.StopTimer()
	slices.Sort(took)
	pct := func(p float64) time.Duration { return took[min(len(took)-1, int(p*float64(len(took))))] }
	b.ReportMetric(pct(0.50).Seconds(), "p50-s")
	b.ReportMetric(pct(0.99).Seconds(), "p99-s")
	b.Logf("death → resumed over %d kills: p50 %v, p99 %v, max %v", len(took), pct(0.5), pct(0.99), took[len(took)-1])
}
