// Package metrics is loopd's Prometheus instrumentation: webhooks by
// outcome, queue depth and age, dispatch latency, live sessions, outbound
// calls and GitHub's rate-limit remaining — and the PDLC metrics no anchor
// has: time in each node, gate dwell per gate, and items stuck at a gate
// longer than a configurable age.
//
// Most of it is read off the daemon's own event stream: Metrics is a
// graph.Sink the daemon adds beside the event log, so the library parts
// (graph, ingress, dispatch) stay free of metrics (raft's observer habit).
// What the event stream does not carry is reported through small typed
// calls (Webhook, Dispatched) or wrappers (Transport, Integrations), and
// gauges are read at scrape time (Config.Queue, Config.LiveSessions).
//
// Node and gate timings are kept in memory from the transitions this
// process sees; after a restart an item's clock starts at its next
// transition.
package metrics

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
)

// Namespace prefixes every metric.
const Namespace = "theloop"

// DefaultStuckAfter is how long an item may wait at a gate before it counts
// as stuck (service.metrics.gateStuckAfterSeconds).
const DefaultStuckAfter = 24 * time.Hour

// Config wires the gauges read at scrape time.
type Config struct {
	// Health reads the daemon's health and its reason (nil: the health
	// gauges are absent): theloop_healthy and theloop_health_reason.
	Health func(ctx context.Context) (ok bool, reason string)
	// StuckAfter is the gate age beyond which an item counts as stuck
	// (default DefaultStuckAfter).
	StuckAfter time.Duration
	// Queue reads the queue's depth, oldest event and dead letters (nil:
	// the queue gauges are absent).
	Queue func(ctx context.Context) (queue.Stats, error)
	// LiveSessions counts active and paused sessions (nil: absent).
	LiveSessions func() int
	// Gates names the human-gate nodes (default: every human node of the
	// shipped loops).
	Gates []string
	// Clock is the clock (required: New refuses a nil one).
	Clock graph.Clock
}

// Metrics holds loopd's collectors on its own registry.
type Metrics struct {
	cfg   Config
	reg   *prometheus.Registry
	gates map[string]bool

	webhooks       *prometheus.CounterVec
	dispatches     *prometheus.CounterVec
	dispatchTime   prometheus.Histogram
	dispatchLat    prometheus.Histogram
	calls          *prometheus.CounterVec
	callTime       *prometheus.HistogramVec
	githubRequests *prometheus.CounterVec
	rateRemaining  prometheus.Gauge
	nodeTime       *prometheus.HistogramVec
	gateDwell      *prometheus.HistogramVec
	transitions    *prometheus.CounterVec
	escalations    *prometheus.CounterVec
	blocks         *prometheus.CounterVec
	hookTime       *prometheus.HistogramVec
	apiRequests    *prometheus.CounterVec
	apiTime        *prometheus.HistogramVec
	forged         *prometheus.CounterVec
	respawned      *prometheus.CounterVec
	respawnGaveUp  prometheus.Counter

	mu    sync.Mutex
	where map[string]position // work item → where it stands
	// blockHooks are the hook label values seen (bounded: a claim's hook
	// is the agent's word).
	blockHooks map[string]bool
	stuck      time.Duration // guarded by mu (SetStuckAfter)
}

// SetStuckAfter changes the stuck-gate age (a daemon's reload).
func (m *Metrics) SetStuckAfter(d time.Duration) {
	if d <= 0 {
		d = DefaultStuckAfter
	}
	m.mu.Lock()
	m.stuck = d
	m.mu.Unlock()
}

type position struct {
	node  string
	since time.Time
}

// Buckets for PDLC timings: a minute to a month.
var pdlcBuckets = []float64{60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400, 14 * 86400, 30 * 86400}

// New builds the collectors and registers them (plus the Go and process
// collectors) on a fresh registry.
func New(cfg Config) (*Metrics, error) {
	if cfg.StuckAfter <= 0 {
		cfg.StuckAfter = DefaultStuckAfter
	}
	if cfg.Clock == nil {
		return nil, errors.New("metrics: no clock (Config.Clock)")
	}
	if cfg.Gates == nil {
		cfg.Gates = ShippedGates()
	}
	m := &Metrics{cfg: cfg, reg: prometheus.NewRegistry(), gates: map[string]bool{}, where: map[string]position{}, blockHooks: map[string]bool{}, stuck: cfg.StuckAfter}
	for _, g := range cfg.Gates {
		m.gates[g] = true
	}
	f := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	}
	m.webhooks = f("webhooks_total", "Webhook deliveries by outcome (accepted, duplicate, rejected, dropped, unavailable) and reason.", "outcome", "reason")
	m.dispatches = f("dispatches_total", "Dispatcher outcomes per event attempt (handled, retry, dead-lettered, ...).", "outcome")
	m.dispatchTime = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "dispatch_duration_seconds",
		Help: "Time one event's handler ran (spawn, paste, graph step).", Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12)})
	m.dispatchLat = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "dispatch_latency_seconds",
		Help: "Time from an event's receipt by the ingress to the end of its successful dispatch.", Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 12)})
	m.calls = f("integration_calls_total", "Outbound integration calls by operation and result (ok, error).", "operation", "result")
	m.callTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "integration_call_duration_seconds",
		Help: "Outbound integration call durations by operation.", Buckets: prometheus.DefBuckets}, []string{"operation"})
	m.githubRequests = f("github_requests_total", "HTTP requests to the GitHub API by method and status code.", "method", "code")
	m.rateRemaining = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "github_rate_limit_remaining",
		Help: "X-RateLimit-Remaining of the last GitHub API answer that carried it."})
	m.rateRemaining.Set(-1)
	m.nodeTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "node_duration_seconds",
		Help: "Time a work item spent in a node, observed when it leaves the node.", Buckets: pdlcBuckets}, []string{"node"})
	m.gateDwell = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "gate_dwell_seconds",
		Help: "Time a work item waited at a human gate, observed when the gate resolves.", Buckets: pdlcBuckets}, []string{"gate"})
	m.transitions = f("graph_transitions_total", "Graph transitions by kind (started, advanced, forced, completed, blocked, parked).", "kind")
	m.escalations = f("graph_escalations_total", "Escalations by node.", "node")
	m.blocks = f("graph_blocks_total", "Blocked claims by the hook that blocked them (the metrics page's blocks by hook; \"other\" past 64 hooks).", "hook")
	m.hookTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "hook_duration_seconds",
		Help: "Wall time of each graph hook run by hook, boundary (entry, exit), mode (live, check) and status.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)},
		[]string{"hook", "boundary", "mode", "status"})
	m.apiRequests = f("api_requests_total", "Control-plane API requests by route and status.", "route", "code")
	m.apiTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "api_request_duration_seconds",
		Help: "Control-plane API request durations by route.", Buckets: prometheus.ExponentialBuckets(0.0005, 3, 10)}, []string{"route"})

	m.forged = f("forged_decisions_total", "Comments refused as gate decisions because GitHub, re-read by id, does not hold them as claimed (routing.forged), by reason.", "reason")

	m.respawned = f("sessions_respawned_total", "Dead sessions brought back, by cause (liveness: the watch found the harness dead; event: an event reached a dead session) and how (resumed, fresh).", "cause", "how")
	m.respawnGaveUp = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "sessions_respawn_gave_up_total",
		Help: "Work items the liveness watch stopped respawning after routing's cap, and escalated."})

	m.reg.MustRegister(m.webhooks, m.respawned, m.respawnGaveUp, m.dispatches, m.dispatchTime, m.dispatchLat, m.calls, m.callTime, m.githubRequests, m.rateRemaining,
		m.nodeTime, m.gateDwell, m.transitions, m.escalations, m.blocks, m.hookTime, m.apiRequests, m.apiTime, m.forged,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&scrapeCollector{m: m})
	return m, nil
}

// respawnHow reads a respawn event's resumed field: resumed or fresh.
func respawnHow(e graph.LogEvent) string {
	for _, f := range e.Fields {
		if f.Key == "resumed" {
			if b, _ := f.Value.(bool); b {
				return "resumed"
			}
		}
	}
	return "fresh"
}

// ShippedGates lists the human-gate nodes of theloop's shipped loops.
func ShippedGates() []string {
	var out []string
	for _, name := range loop.ShippedLoopNames() {
		g, err := loop.ShippedGraph(name)
		if err != nil {
			continue
		}
		for _, n := range g.Nodes() {
			if n.IsHuman() && !slices.Contains(out, n.ID) {
				out = append(out, n.ID)
			}
		}
	}
	return out
}

// Registry is the registry the collectors are on (for tests and embedders
// that add their own).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the text exposition format (GET /metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Webhook counts a delivery the queue was handed: accepted when kept,
// duplicate or unavailable otherwise.
func (m *Metrics) Webhook(err error) {
	switch {
	case err == nil:
		m.webhooks.WithLabelValues("accepted", "").Inc()
	case errors.Is(err, ingress.ErrDuplicate):
		m.webhooks.WithLabelValues("duplicate", "").Inc()
	default:
		m.webhooks.WithLabelValues("unavailable", "").Inc()
	}
}

// Dispatched records one handler run: its duration, and on success the
// latency from the event's receipt.
func (m *Metrics) Dispatched(ev *ingress.Event, took time.Duration, err error) {
	m.dispatchTime.Observe(took.Seconds())
	if err == nil && ev != nil && !ev.ReceivedAt.IsZero() {
		m.dispatchLat.Observe(max(0, m.cfg.Clock.Now().Sub(ev.ReceivedAt).Seconds()))
	}
}

// Hook records one hook run (graph.Options.HookObserver).
func (m *Metrics) Hook(t graph.HookTiming) {
	m.hookTime.WithLabelValues(t.Hook, string(t.Boundary), string(t.Mode), string(t.Status)).Observe(t.Duration.Seconds())
}

// APIRequest records one control-plane request (apiserver.Config.Observe).
func (m *Metrics) APIRequest(route string, code int, d time.Duration) {
	m.apiRequests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.apiTime.WithLabelValues(route).Observe(d.Seconds())
}

var _ graph.Sink = (*Metrics)(nil)

// Emit implements graph.Sink: it reads webhook rejections, routing drops,
// dispatch outcomes and graph transitions off the event stream. It never
// blocks on I/O.
func (m *Metrics) Emit(e graph.LogEvent) {
	str := func(k string) string {
		for _, f := range e.Fields {
			if f.Key == k {
				s, _ := f.Value.(string)
				return s
			}
		}
		return ""
	}
	switch e.Name {
	case ingress.EventRejected:
		// The receiver writes one line per reason per window with the
		// rejections it stands for (ingress.RejectLogEvery).
		n := int64(1)
		for _, f := range e.Fields {
			if c, ok := f.Value.(int64); ok && f.Key == "count" && c > 0 {
				n = c
			}
		}
		m.webhooks.WithLabelValues("rejected", str("reason")).Add(float64(n))
		return
	case ingress.EventDropped:
		outcome := "dropped"
		if r := str("reason"); r == "duplicate-delivery" {
			outcome = "duplicate"
		}
		m.webhooks.WithLabelValues(outcome, str("reason")).Inc()
		return
	case ingress.EventForged:
		m.forged.WithLabelValues(str("reason")).Inc()
		return
	case "session.liveness_respawned":
		m.respawned.WithLabelValues("liveness", respawnHow(e)).Inc()
		return
	case "session.liveness_gave_up":
		m.respawnGaveUp.Inc()
		return
	case "dispatch.respawned":
		m.respawned.WithLabelValues("event", respawnHow(e)).Inc()
		return
	}
	if len(e.Name) > 9 && e.Name[:9] == "dispatch." {
		switch o := e.Name[9:]; o {
		case "handled", "already-handled", "duplicate-content", "retry", "dead-lettered", "abandoned":
			m.dispatches.WithLabelValues(o).Inc()
		}
		return
	}
	item := str("work_item")
	if item == "" {
		return
	}
	switch e.Name {
	case graph.EventStarted:
		m.transitions.WithLabelValues("started").Inc()
		m.enter(item, str("node"), e.Time)
	case graph.EventAdvanced:
		m.transitions.WithLabelValues("advanced").Inc()
		m.leave(item, str("node"), e.Time)
		m.enter(item, str("to"), e.Time)
	case graph.EventForced:
		m.transitions.WithLabelValues("forced").Inc()
		m.leave(item, str("from"), e.Time)
		m.enter(item, str("to"), e.Time)
	case graph.EventCompleted:
		m.transitions.WithLabelValues("completed").Inc()
		m.leave(item, str("node"), e.Time)
		m.mu.Lock()
		delete(m.where, item)
		m.mu.Unlock()
	case graph.EventBlocked:
		m.transitions.WithLabelValues("blocked").Inc()
		m.blocks.WithLabelValues(m.blockHook(str("hook"))).Inc()
	case graph.EventParked:
		m.transitions.WithLabelValues("parked").Inc()
	case graph.EventEscalated:
		m.escalations.WithLabelValues(str("node")).Inc()
	case "graph.cleaned", "session.autoclosed":
		m.mu.Lock()
		delete(m.where, item)
		m.mu.Unlock()
	}
}

// maxBlockHooks bounds the hook label of graph_blocks_total.
const maxBlockHooks = 64

// blockHook is the label a block by hook is counted under: the hook,
// "(unnamed)" when the line names none (as the metrics page says), or
// "other" once maxBlockHooks hooks were seen.
func (m *Metrics) blockHook(h string) string {
	if h == "" {
		return "(unnamed)"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.blockHooks[h] {
		if len(m.blockHooks) >= maxBlockHooks {
			return "other"
		}
		m.blockHooks[h] = true
	}
	return h
}

func (m *Metrics) enter(item, node string, at time.Time) {
	if node == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.where[item]; ok && p.node == node {
		return // re-entering the node it stands at keeps its clock
	}
	m.where[item] = position{node: node, since: at}
}

// leave observes the time spent in node when the item was seen entering it.
func (m *Metrics) leave(item, node string, at time.Time) {
	m.mu.Lock()
	p, ok := m.where[item]
	if ok && p.node == node {
		delete(m.where, item)
	}
	m.mu.Unlock()
	if !ok || p.node != node {
		return
	}
	d := max(0, at.Sub(p.since).Seconds())
	m.nodeTime.WithLabelValues(node).Observe(d)
	if m.gates[node] {
		m.gateDwell.WithLabelValues(node).Observe(d)
	}
}

// scrapeCollector reads the gauges that are computed at scrape time: queue
// depth and age, dead letters, live sessions, items at and stuck at gates.
type scrapeCollector struct{ m *Metrics }

var (
	descDepth  = prometheus.NewDesc(Namespace+"_queue_depth", "Events kept and not yet acknowledged.", nil, nil)
	descAge    = prometheus.NewDesc(Namespace+"_queue_oldest_age_seconds", "Age of the oldest unacknowledged event (0 when empty).", nil, nil)
	descDead   = prometheus.NewDesc(Namespace+"_queue_dead_letters", "Dead letters waiting for a replay.", nil, nil)
	descQErr   = prometheus.NewDesc(Namespace+"_queue_up", "1 when the queue answered the scrape, else 0.", nil, nil)
	descLive   = prometheus.NewDesc(Namespace+"_live_sessions", "Active and paused agent sessions.", nil, nil)
	descAtGate = prometheus.NewDesc(Namespace+"_gate_waiting_items", "Work items standing at a human gate.", []string{"gate"}, nil)
	descStuck  = prometheus.NewDesc(Namespace+"_gate_stuck_items", "Work items at a human gate for longer than service.metrics.gateStuckAfterSeconds.", []string{"gate"}, nil)
	descStuckT = prometheus.NewDesc(Namespace+"_gate_stuck_threshold_seconds", "The age beyond which an item at a gate counts as stuck.", nil, nil)
	descHealth = prometheus.NewDesc(Namespace+"_healthy", "1 when loopd can keep what it is sent (GET /health ok), else 0.", nil, nil)
	descWhy    = prometheus.NewDesc(Namespace+"_health_reason", "1 for the reason loopd is not healthy (GET /health reason); absent when healthy.", []string{"reason"}, nil)
)

func (c *scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDepth, descAge, descDead, descQErr, descLive, descAtGate, descStuck, descStuckT, descHealth, descWhy} {
		ch <- d
	}
}

func (c *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	now := m.cfg.Clock.Now()
	if m.cfg.Health != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ok, reason := m.cfg.Health(ctx)
		cancel()
		v := 0.0
		if ok {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descHealth, prometheus.GaugeValue, v)
		if !ok {
			ch <- prometheus.MustNewConstMetric(descWhy, prometheus.GaugeValue, 1, reason)
		}
	}
	if m.cfg.Queue != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := m.cfg.Queue(ctx)
		cancel()
		if err != nil {
			ch <- prometheus.MustNewConstMetric(descQErr, prometheus.GaugeValue, 0)
		} else {
			ch <- prometheus.MustNewConstMetric(descQErr, prometheus.GaugeValue, 1)
			ch <- prometheus.MustNewConstMetric(descDepth, prometheus.GaugeValue, float64(st.Depth))
			age := 0.0
			if st.Depth > 0 && !st.Oldest.IsZero() {
				age = max(0, now.Sub(st.Oldest).Seconds())
			}
			ch <- prometheus.MustNewConstMetric(descAge, prometheus.GaugeValue, age)
			ch <- prometheus.MustNewConstMetric(descDead, prometheus.GaugeValue, float64(st.Dead))
		}
	}
	if m.cfg.LiveSessions != nil {
		ch <- prometheus.MustNewConstMetric(descLive, prometheus.GaugeValue, float64(m.cfg.LiveSessions()))
	}
	waiting, stuck := map[string]int{}, map[string]int{}
	m.mu.Lock()
	after := m.stuck
	for _, p := range m.where {
		if !m.gates[p.node] {
			continue
		}
		waiting[p.node]++
		if now.Sub(p.since) > after {
			stuck[p.node]++
		}
	}
	m.mu.Unlock()
	for _, g := range m.cfg.Gates {
		ch <- prometheus.MustNewConstMetric(descAtGate, prometheus.GaugeValue, float64(waiting[g]), g)
		ch <- prometheus.MustNewConstMetric(descStuck, prometheus.GaugeValue, float64(stuck[g]), g)
	}
	ch <- prometheus.MustNewConstMetric(descStuckT, prometheus.GaugeValue, after.Seconds())
}

// Integrations wraps next, counting and timing every call by operation.
func (m *Metrics) Integrations(next graph.Integrations) graph.Integrations {
	return instrumentedIntegrations{m: m, next: next}
}

type instrumentedIntegrations struct {
	m    *Metrics
	next graph.Integrations
}

func (i instrumentedIntegrations) Call(ctx context.Context, op graph.Operation, args map[string]any) (map[string]any, error) {
	start := time.Now()
	res, err := i.next.Call(ctx, op, args)
	result := "ok"
	if err != nil {
		result = "error"
	}
	i.m.calls.WithLabelValues(string(op), result).Inc()
	i.m.callTime.WithLabelValues(string(op)).Observe(time.Since(start).Seconds())
	return res, err
}

// Transport wraps an HTTP transport (nil: http.DefaultTransport) to count
// requests to the GitHub API and keep the rate-limit remaining.
func (m *Metrics) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripper{m: m, next: next}
}

type roundTripper struct {
	m    *Metrics
	next http.RoundTripper
}

func (t roundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
		if v := resp.Header.Get("X-RateLimit-Remaining"); v != "" {
			if n, perr := strconv.ParseFloat(v, 64); perr == nil && n >= 0 {
				t.m.rateRemaining.Set(n)
			}
		}
	}
	t.m.githubRequests.WithLabelValues(r.Method, code).Inc()
	return resp, err
}
