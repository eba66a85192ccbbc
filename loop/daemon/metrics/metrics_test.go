package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/metrics"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
)

// scrape serves the handler over HTTP and parses the answer with
// Prometheus's own text parser.
func scrape(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Accept", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// value finds the sample of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	f, ok := fams[name]
	require.True(t, ok, "metric %s is exposed", name)
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		return m
	}
	t.Fatalf("%s has no sample with labels %v", name, want)
	return nil
}

func gauge(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	return value(t, fams, name, labels).GetGauge().GetValue()
}

func counter(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	return value(t, fams, name, labels).GetCounter().GetValue()
}

func ev(at time.Time, name string, fields ...any) graph.LogEvent {
	e := graph.LogEvent{Time: at, Name: name, Level: graph.LevelInfo}
	for i := 0; i+1 < len(fields); i += 2 {
		e.Fields = append(e.Fields, graph.Field{Key: fields[i].(string), Value: fields[i+1]})
	}
	return e
}

func TestMetricsParseAndCountWhatHappened(t *testing.T) {
	t0 := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)
	clock := graphtest.NewClock(t0)
	m := newMetrics(t, metrics.Config{
		StuckAfter: 24 * time.Hour,
		Clock:      clock,
		Queue: func(context.Context) (queue.Stats, error) {
			return queue.Stats{Depth: 2, Oldest: t0.Add(-90 * time.Second), Dead: 1}, nil
		},
		LiveSessions: func() int { return 3 },
	})

	// Webhooks: two accepted, a duplicate delivery, a bad signature, an
	// unauthorized actor, the queue down.
	m.Webhook(nil)
	m.Webhook(nil)
	m.Webhook(fmt.Errorf("x: %w", ingress.ErrDuplicate))
	m.Webhook(fmt.Errorf("x: %w", ingress.ErrUnavailable))
	m.Emit(ev(t0, ingress.EventRejected, "reason", "bad-signature"))
	// A rate-limited summary line stands for its count of rejections.
	m.Emit(graph.LogEvent{Time: t0, Name: ingress.EventRejected, Fields: []graph.Field{{Key: "reason", Value: "invalid-signature"}, {Key: "count", Value: int64(502)}}})
	m.Emit(ev(t0, ingress.EventDropped, "reason", "unauthorized-actor"))
	m.Emit(ev(t0, ingress.EventDropped, "reason", "duplicate-delivery"))
	m.Emit(ev(t0, ingress.EventForged, "work_item", "github:acme/widgets#3", "comment_id", "990000001", "claimed_author", "dana", "reason", "not-found"))
	m.Emit(ev(t0, ingress.EventForged, "work_item", "github:acme/widgets#3", "comment_id", "7", "claimed_author", "dana", "reason", "not-found"))
	m.Emit(ev(t0, "dispatch.handled"))
	m.Emit(ev(t0, "dispatch.retry"))
	m.Dispatched(&ingress.Event{ReceivedAt: t0.Add(-3 * time.Second)}, 250*time.Millisecond, nil)

	// Item A walks phase-selection (a gate) for 2 h, requirements-definition
	// for 3 h, then waits at requirements-approval for 30 h: stuck.
	a, b := "github:acme/widgets#1", "github:acme/widgets#2"
	m.Emit(ev(t0, "graph.started", "work_item", a, "node", "phase-selection"))
	m.Emit(ev(t0.Add(2*time.Hour), "graph.advanced", "work_item", a, "node", "phase-selection", "to", "requirements-definition"))
	m.Emit(ev(t0.Add(5*time.Hour), "graph.advanced", "work_item", a, "node", "requirements-definition", "to", "requirements-approval"))
	// A block and a re-entry of the same node keep the clock.
	m.Emit(ev(t0.Add(6*time.Hour), "graph.blocked", "work_item", a, "node", "requirements-approval"))
	// Item B arrives at the same gate later: waiting, not stuck.
	m.Emit(ev(t0.Add(20*time.Hour), "graph.forced", "work_item", b, "from", "phase-selection", "to", "requirements-approval"))
	clock.Advance(35 * time.Hour)

	fams := scrape(t, m)
	require.Equal(t, 2.0, counter(t, fams, "theloop_webhooks_total", map[string]string{"outcome": "accepted"}))
	require.Equal(t, 1.0, counter(t, fams, "theloop_webhooks_total", map[string]string{"outcome": "duplicate", "reason": ""}))
	require.Equal(t, 1.0, counter(t, fams, "theloop_webhooks_total", map[string]string{"outcome": "duplicate", "reason": "duplicate-delivery"}))
	require.Equal(t, 1.0, counter(t, fams, "theloop_webhooks_total", map[string]string{"outcome": "rejected", "reason": "bad-signature"}))
	require.Equal(t, 502.0, counter(t, fams, "theloop_webhooks_total", map[string]string{"outcome": "rejected", "reason": "invalid-signature"}))
	require.Equal(t, 1.0, counter(t, fams, "theloop_webhooks_total", map[string]string{"outcome": "dropped", "reason": "unauthorized-actor"}))
	require.Equal(t, 1.0, counter(t, fams, "theloop_webhooks_total", map[string]string{"outcome": "unavailable"}))
	require.Equal(t, 1.0, counter(t, fams, "theloop_dispatches_total", map[string]string{"outcome": "retry"}))
	require.Equal(t, 2.0, counter(t, fams, "theloop_forged_decisions_total", map[string]string{"reason": "not-found"}))

	require.Equal(t, 2.0, gauge(t, fams, "theloop_queue_depth", nil))
	require.Equal(t, 35*3600.0+90, gauge(t, fams, "theloop_queue_oldest_age_seconds", nil))
	require.Equal(t, 1.0, gauge(t, fams, "theloop_queue_dead_letters", nil))
	require.Equal(t, 1.0, gauge(t, fams, "theloop_queue_up", nil))
	require.Equal(t, 3.0, gauge(t, fams, "theloop_live_sessions", nil))

	h := value(t, fams, "theloop_dispatch_latency_seconds", nil).GetHistogram()
	require.Equal(t, uint64(1), h.GetSampleCount())
	require.InDelta(t, 3.0, h.GetSampleSum(), 0.001, "receipt to done, on the injected clock")
	require.Equal(t, uint64(1), value(t, fams, "theloop_dispatch_duration_seconds", nil).GetHistogram().GetSampleCount())

	nd := value(t, fams, "theloop_node_duration_seconds", map[string]string{"node": "requirements-definition"}).GetHistogram()
	require.Equal(t, uint64(1), nd.GetSampleCount())
	require.Equal(t, 3*3600.0, nd.GetSampleSum())
	gd := value(t, fams, "theloop_gate_dwell_seconds", map[string]string{"gate": "phase-selection"}).GetHistogram()
	require.Equal(t, uint64(1), gd.GetSampleCount())
	require.Equal(t, 2*3600.0, gd.GetSampleSum())
	_, nonGate := fams["theloop_gate_dwell_seconds"]
	require.True(t, nonGate)
	for _, mm := range fams["theloop_gate_dwell_seconds"].Metric {
		require.NotEqual(t, "requirements-definition", mm.Label[0].GetValue(), "a working node is not a gate")
	}

	require.Equal(t, 2.0, gauge(t, fams, "theloop_gate_waiting_items", map[string]string{"gate": "requirements-approval"}))
	require.Equal(t, 1.0, gauge(t, fams, "theloop_gate_stuck_items", map[string]string{"gate": "requirements-approval"}))
	require.Equal(t, 0.0, gauge(t, fams, "theloop_gate_stuck_items", map[string]string{"gate": "design-approval"}))
	require.Equal(t, 86400.0, gauge(t, fams, "theloop_gate_stuck_threshold_seconds", nil))
	require.Equal(t, 1.0, counter(t, fams, "theloop_graph_transitions_total", map[string]string{"kind": "forced"}))
	require.Equal(t, 1.0, counter(t, fams, "theloop_graph_blocks_total", map[string]string{"hook": "(unnamed)"}), "a block by hook, as the metrics page counts it")

	// Resolving the gate observes the dwell and clears the stuck count.
	m.Emit(ev(t0.Add(35*time.Hour), "graph.advanced", "work_item", a, "node", "requirements-approval", "to", "design"))
	fams = scrape(t, m)
	gd = value(t, fams, "theloop_gate_dwell_seconds", map[string]string{"gate": "requirements-approval"}).GetHistogram()
	require.Equal(t, 30*3600.0, gd.GetSampleSum())
	require.Equal(t, 0.0, gauge(t, fams, "theloop_gate_stuck_items", map[string]string{"gate": "requirements-approval"}))
	require.Equal(t, 1.0, gauge(t, fams, "theloop_gate_waiting_items", map[string]string{"gate": "requirements-approval"}))
}

// Blocks by hook: the hook a claim names is the agent's word, so the label
// takes at most 64 values; the rest count as "other".
func TestBlocksByHookAreBounded(t *testing.T) {
	m := newMetrics(t, metrics.Config{})
	for i := range 70 {
		m.Emit(graph.LogEvent{Name: graph.EventBlocked, Fields: []graph.Field{{Key: "work_item", Value: "github:o/r#1"}, {Key: "hook", Value: fmt.Sprintf("hook-%d", i)}}})
	}
	m.Emit(graph.LogEvent{Name: graph.EventBlocked, Fields: []graph.Field{{Key: "work_item", Value: "github:o/r#1"}, {Key: "hook", Value: "hook-3"}}})
	fams := scrape(t, m)
	require.Len(t, fams["theloop_graph_blocks_total"].GetMetric(), 65)
	require.Equal(t, 2.0, counter(t, fams, "theloop_graph_blocks_total", map[string]string{"hook": "hook-3"}))
	require.Equal(t, 6.0, counter(t, fams, "theloop_graph_blocks_total", map[string]string{"hook": "other"}))
}

func TestQueueDownIsVisibleNotFatal(t *testing.T) {
	m := newMetrics(t, metrics.Config{Queue: func(context.Context) (queue.Stats, error) { return queue.Stats{}, errors.New("down") }})
	fams := scrape(t, m)
	require.Equal(t, 0.0, gauge(t, fams, "theloop_queue_up", nil))
	_, ok := fams["theloop_queue_depth"]
	require.False(t, ok, "no made-up depth when the queue does not answer")
}

func TestGitHubCallsAndRateLimit(t *testing.T) {
	gh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Remaining", "4711")
		if r.URL.Path == "/missing" {
			w.WriteHeader(404)
		}
	}))
	defer gh.Close()
	m := newMetrics(t, metrics.Config{})
	hc := &http.Client{Transport: m.Transport(nil)}
	for _, p := range []string{"/a", "/b", "/missing"} {
		resp, err := hc.Get(gh.URL + p)
		require.NoError(t, err)
		resp.Body.Close()
	}
	integ := m.Integrations(graphtest.NewTickets())
	_, err := integ.Call(context.Background(), "github.add-comment", map[string]any{"ref": "github:acme/widgets#1", "body": "hi"})
	require.NoError(t, err)
	_, err = integ.Call(context.Background(), "github.frobnicate", nil)
	require.Error(t, err)

	fams := scrape(t, m)
	require.Equal(t, 4711.0, gauge(t, fams, "theloop_github_rate_limit_remaining", nil))
	require.Equal(t, 2.0, counter(t, fams, "theloop_github_requests_total", map[string]string{"method": "GET", "code": "200"}))
	require.Equal(t, 1.0, counter(t, fams, "theloop_github_requests_total", map[string]string{"code": "404"}))
	require.Equal(t, 1.0, counter(t, fams, "theloop_integration_calls_total", map[string]string{"operation": "github.add-comment", "result": "ok"}))
	require.Equal(t, 1.0, counter(t, fams, "theloop_integration_calls_total", map[string]string{"operation": "github.frobnicate", "result": "error"}))
}

// Hook durations come from the runtime itself (graph.Options.HookObserver).
func TestHookDurationsFromARealRuntime(t *testing.T) {
	repo := t.TempDir()
	for rel, content := range map[string]string{
		".the-loop/harness-config.yaml":       "ticketing:\n  github: {owner: acme, repo: widgets}\n",
		"docs/specs/issue-42/requirements.md": "# R\n\n## Requirements\n\n1. x\n\n## Security considerations\n\nnone\n",
	} {
		p := filepath.Join(repo, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	m := newMetrics(t, metrics.Config{})
	rt, err := loop.Open(repo, loop.Options{WorkItem: "issue-42", HookObserver: m.Hook})
	require.NoError(t, err)
	_, err = rt.Status(context.Background(), "issue-42", true)
	require.NoError(t, err)
	fams := scrape(t, m)
	f, ok := fams["theloop_hook_duration_seconds"]
	require.True(t, ok)
	var n uint64
	for _, s := range f.Metric {
		n += s.GetHistogram().GetSampleCount()
	}
	require.Greater(t, n, uint64(5), "every exit chain's hooks were timed")
	require.Equal(t, uint64(1), value(t, fams, "theloop_hook_duration_seconds", map[string]string{"hook": "validate-artifacts", "boundary": "exit", "mode": "check", "status": "pass"}).GetHistogram().GetSampleCount(), "requirements-definition's exit chain")
}

// Respawns are counted by cause (the liveness watch, an event) and how
// (resumed, fresh); the watch giving up on a work item is counted apart.
func TestRespawnsCounted(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	m := newMetrics(t, metrics.Config{})
	m.Emit(ev(at, "session.liveness_respawned", "work_item", "github:o/r#1", "resumed", true))
	m.Emit(ev(at, "session.liveness_respawned", "work_item", "github:o/r#1", "resumed", false))
	m.Emit(ev(at, "session.liveness_respawned", "work_item", "github:o/r#1", "resumed", true))
	m.Emit(ev(at, "dispatch.respawned", "work_item", "github:o/r#2", "resumed", true))
	m.Emit(ev(at, "session.liveness_gave_up", "work_item", "github:o/r#1"))
	fams := scrape(t, m)
	require.Equal(t, 2.0, counter(t, fams, "theloop_sessions_respawned_total", map[string]string{"cause": "liveness", "how": "resumed"}))
	require.Equal(t, 1.0, counter(t, fams, "theloop_sessions_respawned_total", map[string]string{"cause": "liveness", "how": "fresh"}))
	require.Equal(t, 1.0, counter(t, fams, "theloop_sessions_respawned_total", map[string]string{"cause": "event", "how": "resumed"}))
	require.Equal(t, 1.0, counter(t, fams, "theloop_sessions_respawn_gave_up_total", nil))
}

// newMetrics builds m on cfg, on the wall clock unless cfg names one.
func newMetrics(t testing.TB, cfg metrics.Config) *metrics.Metrics {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = graph.SystemClock{}
	}
	m, err := metrics.New(cfg)
	require.NoError(t, err)
	return m
}
