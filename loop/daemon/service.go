package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/internal/buildinfo"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
	"github.com/theloop-dev/theloop/loop/daemon/dispatch"
	"github.com/theloop-dev/theloop/loop/daemon/mcpserver"
	"github.com/theloop-dev/theloop/loop/daemon/metrics"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
	"github.com/theloop-dev/theloop/sessions"
)

// ServiceConfig is the control plane (service.*): the API, /metrics and
// /mcp on one listener — the unix socket <state root>/loopd.sock (0600)
// always, and TCP only when Listen is set and a token is present.
type ServiceConfig struct {
	// Disabled turns the control plane off (service.enabled: false).
	Disabled bool
	// Listen is an additional TCP address (service.listen, "" = none). It
	// requires Token.
	Listen string
	// Token is the bearer token a TCP client must send (read from the
	// variable service.tokenEnv names; never from a file).
	Token string
	// StreamDisabled unmounts /api/v1/events/stream
	// (service.stream.enabled: false).
	StreamDisabled bool
	// StreamMaxSubscribers and StreamKeepAlive tune /api/v1/events/stream.
	StreamMaxSubscribers int
	StreamKeepAlive      time.Duration
	// MCPDisabled unmounts /mcp (service.mcp.enabled: false).
	MCPDisabled bool
	// GateStuckAfter is the age beyond which an item waiting at a gate
	// counts in theloop_gate_stuck_items (service.metrics.gateStuckAfterSeconds,
	// default 24 h).
	GateStuckAfter time.Duration
}

// service is the running control plane.
type service struct {
	rl      reloadState // reload.go
	graphs  *apiserver.Graphs
	stream  *apiserver.Stream
	metrics *metrics.Metrics
	started time.Time
	servers []*http.Server
	tcpAddr string
}

// structuredLogger is the structured logger (Deps.Logger, else text on
// Deps.Log).
func structuredLogger(deps Deps) *slog.Logger {
	if deps.Logger != nil {
		return deps.Logger
	}
	return slog.New(slog.NewTextHandler(deps.Log, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// Sessions is the tmux runner hosting the agents' sessions (nil before Run
// built it): for embedders that show an operator how to attach, or end a
// session's world when they are done.
func (d *Daemon) Sessions() *sessions.Tmux { return d.tmux }

// ControlSocket is the control plane's unix socket path.
func (d *Daemon) ControlSocket() string { return api.SocketPath(d.cfg.StateRoot) }

// ControlAddr is the TCP control-plane address (valid after Ready; "" when
// the control plane listens on the socket only).
func (d *Daemon) ControlAddr() string { return d.svc.tcpAddr }

// serviceProbes are what the control plane's metrics read from the running
// daemon.
type serviceProbes struct {
	health       func(context.Context) api.Health
	queue        func(context.Context) (queue.Stats, error)
	liveSessions func() int
}

// openSinks builds the stream and the metrics: the sinks the control plane
// adds to the event log (the live stream).
func (s *service) openSinks(cfg ServiceConfig, clock graph.Clock, p serviceProbes) ([]graph.Sink, error) {
	s.stream = apiserver.NewStream(apiserver.StreamConfig{Source: "loopd", MaxSubscribers: cfg.StreamMaxSubscribers, KeepAlive: cfg.StreamKeepAlive})
	m, err := metrics.New(metrics.Config{
		Health: func(ctx context.Context) (bool, string) {
			h := p.health(ctx)
			return h.OK, h.Reason
		},
		StuckAfter:   cfg.GateStuckAfter,
		Clock:        clock,
		Queue:        p.queue,
		LiveSessions: p.liveSessions,
	})
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	s.metrics = m
	return []graph.Sink{s.stream, s.metrics}, nil
}

// liveSessions counts the live sessions of reg (0 before it is open).
func liveSessions(reg func() *sessions.Registry) func() int {
	return func() int {
		r := reg()
		if r == nil {
			return 0
		}
		recs, _ := r.List()
		n := 0
		for _, rec := range recs {
			if rec.Status.Live() {
				n++
			}
		}
		return n
	}
}

// Metrics is the daemon's Prometheus instrumentation (valid after New's
// build, i.e. once Run started; served at /metrics on the control plane).
func (d *Daemon) Metrics() *metrics.Metrics { return d.svc.metrics }

// countWebhook records what became of a delivery handed to the queue.
func (s *service) countWebhook(err error) {
	if s.metrics != nil {
		s.metrics.Webhook(err)
	}
}

// instrument counts and times every outbound integration call.
func (s *service) instrument(next graph.Integrations) graph.Integrations {
	if s.metrics == nil {
		return next
	}
	return s.metrics.Integrations(next)
}

// httpClient is base (or a default client) with a transport that counts
// GitHub requests and keeps the rate-limit remaining.
func (s *service) httpClient(base *http.Client) *http.Client {
	c := &http.Client{Timeout: 60 * time.Second}
	if base != nil {
		cp := *base
		c = &cp
	}
	if s.metrics != nil {
		c.Transport = s.metrics.Transport(c.Transport)
	}
	return c
}

// hookObserver feeds theloop_hook_duration_seconds (nil without metrics).
func (s *service) hookObserver() func(graph.HookTiming) {
	if s.metrics == nil {
		return nil
	}
	return s.metrics.Hook
}

// timed measures each dispatch (handler time, and receipt-to-done latency)
// under the policy's read lock; note sees each event first (the
// dashboard's PR/CI state), timeout bounds one (0: none).
func (s *service) timed(h dispatch.Handler, note func(*ingress.Event), timeout time.Duration) dispatch.Handler {
	return timedHandler{policy: &s.rl.policy, metrics: s.metrics, note: note, timeout: timeout, h: h}
}

// timedHandler is timed's result; it passes the handler's Triage on.
type timedHandler struct {
	policy  *sync.RWMutex
	metrics *metrics.Metrics
	note    func(*ingress.Event)
	timeout time.Duration
	h       dispatch.Handler
}

func (t timedHandler) Handle(ctx context.Context, ev *ingress.Event) error {
	// The policy (reload.go) holds still for the whole dispatch.
	t.policy.RLock()
	defer t.policy.RUnlock()
	t.note(ev) // prci.go
	start := time.Now()
	if t.timeout > 0 {
		// routing.dispatchTimeoutSeconds: a stuck dispatch is cancelled
		// (and the event redelivered) rather than holding its slot.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.timeout)
		defer cancel()
	}
	err := t.h.Handle(ctx, ev)
	if t.metrics != nil {
		t.metrics.Dispatched(ev, time.Since(start), err)
	}
	return err
}

// Triage counts a triaged drop as a dispatch dropped without effect.
func (t timedHandler) Triage(ctx context.Context, ev *ingress.Event) error {
	tr, ok := t.h.(dispatch.Triager)
	if !ok {
		return nil
	}
	t.policy.RLock()
	defer t.policy.RUnlock()
	start := time.Now()
	err := tr.Triage(ctx, ev)
	if err != nil && t.metrics != nil {
		t.metrics.Dispatched(ev, time.Since(start), err)
	}
	return err
}

// startService serves the control plane: everything it serves (the API,
// /metrics, /mcp) on the socket, and on TCP when configured.
func (d *Daemon) startService() (stop func(), err error) {
	if d.cfg.Service.Disabled {
		return func() {}, nil
	}
	d.svc.started = d.deps.Clock.Now()
	mux := http.NewServeMux()
	graphs := &apiserver.Graphs{
		SpecDir: d.cfg.Routing.GraphSpecDir, AuthorizedUsers: d.cfg.Routing.AuthorizedUsers, ExecuteKeyword: d.cfg.ExecuteKeyword(),
		SessionPerPr: d.cfg.Routing.Tmux.SessionPerPr, Integrations: d.integ, Sink: d.sink, Clock: d.deps.Clock,
		HookObserver: d.svc.hookObserver(), Scrub: d.scrubValue,
	}
	d.svc.graphs = graphs
	observe := func(route string, code int, took time.Duration) {
		d.svc.metrics.APIRequest(route, code, took)
		if route != "/health" {
			d.emit("api.request", graph.LevelDebug, graph.Field{Key: "path", Value: api.Prefix + route}, graph.Field{Key: "status", Value: code},
				graph.Field{Key: "duration_ms", Value: took.Milliseconds()})
		}
	}
	stream := d.svc.stream
	if d.cfg.Service.StreamDisabled {
		stream = nil // service.stream.enabled: false — /events/stream answers 404
	}
	a, err := apiserver.New(apiserver.Config{Clock: d.deps.Clock, Log: structuredLogger(d.deps), Observe: observe}, apiserver.Backend{
		Graphs:        graphs,
		Sessions:      d.desk,
		Queue:         serviceQueue{d},
		EventLogPath:  d.cfg.EventLog.Path,
		FlushEventLog: d.FlushLogs,
		Stream:        stream,
		Status:        d.status,
		Health:        d.Health,
		Attention:     d.board().attention,
		Usage:         d.Usage, // usagewatch.go
		Restart: func(_ context.Context, actor string, withUpgrade bool) (api.RestartResult, error) {
			return d.restarts.request(d.emit, d.svc.started, actor, withUpgrade), nil
		},
		WorkItems: d.board().workItems,
	})
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	mux.Handle(api.Prefix+"/", a)
	mux.Handle("GET /metrics", d.svc.metrics.Handler())
	if !d.cfg.Service.MCPDisabled {
		ms, err := mcpserver.New(mcpserver.Config{
			Graphs: graphs, EventLogPath: d.cfg.EventLog.Path, FlushEventLog: d.FlushLogs, Integrations: d.integ, Sink: d.sink,
			Clock: d.deps.Clock, Version: buildinfo.Version(d.deps.Version), Operator: mcpOperator{d},
		})
		if err != nil {
			return nil, fmt.Errorf("daemon: %w", err)
		}
		mux.Handle(mcpserver.Path, mcpserver.Handler(ms))
	}
	return d.svc.serve(d.cfg.Service, d.ControlSocket(), socketPeer(d.cfg.Dashboard.Operator), mux)
}

// serve listens on socket (and on cfg.Listen() when set, behind its token)
// and serves h there, each socket peer named by peers; stop shuts it down.
func (s *service) serve(cfg ServiceConfig, socket string, peers apiserver.PeerPolicy, h http.Handler) (stop func(), err error) {
	ln, err := apiserver.ListenUnix(socket)
	if err != nil {
		return nil, err
	}
	stop = func() { s.stop(socket) }
	serve := func(ln net.Listener, h http.Handler, conn func(context.Context, net.Conn) context.Context) {
		srv := &http.Server{Handler: h, ConnContext: conn, ReadHeaderTimeout: 10 * time.Second}
		s.servers = append(s.servers, srv)
		go func() { _ = srv.Serve(ln) }()
	}
	// Every request on the socket carries its peer's identity, or is
	// refused (operator.go); on TCP the bearer token is the identity.
	serve(ln, apiserver.Authenticated(h), apiserver.PeerContext(peers))
	if cfg.Listen != "" {
		tln, err := apiserver.ListenTCP(cfg.Listen, cfg.Token)
		if err != nil {
			stop()
			return nil, err
		}
		s.tcpAddr = tln.Addr().String()
		serve(tln, apiserver.RequireToken(cfg.Token, apiserver.Authenticated(h)), nil)
	}
	return stop, nil
}

func (s *service) stop(socket string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range s.servers {
		// SSE streams never go idle: Shutdown waits for them until ctx,
		// then Close cuts them.
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
	}
	_ = os.Remove(socket)
}

func (d *Daemon) status(ctx context.Context) api.Status {
	now := d.deps.Clock.Now()
	h := d.Health(ctx)
	st := api.Status{Health: &h, Version: buildinfo.Version(d.deps.Version), PID: os.Getpid(), StateRoot: d.cfg.StateRoot, Webhook: d.WebhookURL(),
		StartedAt: d.svc.started.UTC(), Uptime: now.Sub(d.svc.started).Seconds(), Harnesses: d.harness.views(ctx)}
	if w := d.harness.defaultWarning(); w != "" {
		st.Warnings = append(st.Warnings, w)
	}
	if d.q != nil {
		if qs, err := d.q.Stats(ctx); err == nil {
			st.Queue = apiserver.NewQueueView(qs, now)
		} else {
			st.Warnings = append(st.Warnings, err.Error())
		}
	}
	recs, errs := d.reg.List()
	for _, r := range recs {
		if r.Status.Live() {
			st.LiveSessions++
		}
	}
	if len(errs) > 0 {
		st.Warnings = append(st.Warnings, fmt.Sprintf("%d session record(s) could not be read; first: %v", len(errs), errs[0]))
	}
	if w := d.worlds.undefendedWarning(); w != "" {
		st.Warnings = append(st.Warnings, w)
	}
	d.restarts.status(&st)
	if sh := d.cluster.sharedDispatcher(); sh != nil {
		st.Cluster = &api.ClusterView{Node: d.cfg.Cluster().Node, MaxSessions: d.cfg.Cluster().MaxSessions, Owned: sh.Leases().Items()}
	}
	return st
}

// serviceQueue is the queue as the API sees it.
type serviceQueue struct{ d *Daemon }

func (q serviceQueue) Stats(ctx context.Context) (queue.Stats, error) {
	if q.d.q == nil {
		return queue.Stats{}, errors.New("daemon: not running")
	}
	return q.d.q.Stats(ctx)
}

func (q serviceQueue) DeadLetters(ctx context.Context) ([]queue.DeadLetter, error) {
	return q.d.DeadLetters(ctx)
}

func (q serviceQueue) Replay(ctx context.Context, seq uint64) error {
	err := q.d.Replay(ctx, seq)
	if err == nil {
		q.d.emit("queue.replayed", graph.LevelInfo, graph.Field{Key: "seq", Value: seq})
	}
	return err
}

var _ apiserver.Queue = serviceQueue{}

// Healthy reports whether the daemon can do its work: the queue answers.
// The systemd watchdog is pinged only while it does.
func (d *Daemon) Healthy(ctx context.Context) error {
	if h := d.Health(ctx); !h.OK {
		return healthError{h}
	}
	return nil
}

// Health is the daemon's one health answer (api.Health): every health
// endpoint reports it, so that they never disagree.
func (d *Daemon) Health(ctx context.Context) api.Health {
	bad := func(reason string, err error) api.Health {
		return api.Health{State: api.HealthUnavailable, Reason: reason, Detail: err.Error()}
	}
	if d.q == nil {
		return bad(api.HealthNotRunning, errors.New("daemon: not running"))
	}
	if err := persistHealth(d.q, d.elog, d.audit); err != nil { // persist.go
		if diskFull(err) {
			return bad(api.HealthDiskFull, err)
		}
		return bad(api.HealthCannotPersist, err)
	}
	if _, err := d.q.Stats(ctx); err != nil {
		return bad(api.HealthQueueUnavailable, err)
	}
	return api.Health{OK: true, State: api.HealthOK}
}

// diskFull reports an error from a full file system.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || strings.Contains(strings.ToLower(err.Error()), "no space left")
}

// healthError is an unhealthy answer as an error; HealthReason is what the
// webhook port's /healthz names (ingress.HealthReason).
type healthError struct{ h api.Health }

func (e healthError) Error() string        { return e.h.Reason + ": " + e.h.Detail }
func (e healthError) HealthReason() string { return e.h.Reason }

// StatusLine is a one-line summary for systemd's STATUS=.
func (d *Daemon) StatusLine() string {
	st := d.status(context.Background())
	q := "queue ?"
	if st.Queue != nil {
		q = fmt.Sprintf("%d queued, %d dead", st.Queue.Depth, st.Queue.DeadLetters)
	}
	return fmt.Sprintf("%d live session(s), %s", st.LiveSessions, q)
}
