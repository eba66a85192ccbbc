package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop"
)

// 300,000 unsigned POSTs through the real receiver, with a clock that
// moves a second per request (so the rate-limited webhook.rejected lines
// come thirty thousand times) and an event log small enough to rotate:
// the event log ends up holding only refusals, the audit log still holds
// the decision, the force and the routing recorded before the flood, and
// no refusal.
func TestUnsignedFloodLeavesTheAuditLogIntact(t *testing.T) {
	dir := t.TempDir()
	clock := graphtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	events, err := loop.OpenEventLog(filepath.Join(dir, "events.jsonl"), "loopd", loop.EventLogOptions{Clock: clock, MaxBytes: 256 << 10, MaxBackups: 3, Warnings: io.Discard})
	require.NoError(t, err)
	defer events.Close()
	auditPath := filepath.Join(dir, AuditLogName)
	audit, err := loop.OpenEventLog(auditPath, "loopd", loop.EventLogOptions{Clock: clock, MaxBytes: auditMaxBytes, MaxBackups: auditMaxBackups, Warnings: io.Discard})
	require.NoError(t, err)
	defer audit.Close()
	sink := logsSink{events: events, audit: audit} // as loopd writes its two logs

	for _, name := range []string{"graph.decision_recorded", "graph.forced", "graph.node_skipped", "routing.routed"} {
		sink.Emit(graph.LogEvent{Name: name, Fields: []graph.Field{{Key: "work_item", Value: "github:octo/demo#1"}}})
	}

	cfg := ingress.DefaultConfig()
	cfg.Secret = []byte("s3cret")
	cfg.Repositories = []string{"octo/demo"}
	recv, err := ingress.NewReceiver(cfg, ingress.ReceiverDeps{Sink: ingress.SinkFunc(func(context.Context, *ingress.Event) error { return nil }), Log: sink, Clock: clock})
	require.NoError(t, err)
	const posts = 300_000
	body := `{"action":"opened","repository":{"full_name":"octo/demo"}}`
	for i := range posts {
		req := httptest.NewRequest(http.MethodPost, cfg.Path, strings.NewReader(body))
		req.Header.Set("X-GitHub-Event", "issues")
		req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("flood-%d", i))
		req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
		w := httptest.NewRecorder()
		recv.ServeHTTP(w, req)
		require.Equal(t, http.StatusUnauthorized, w.Code)
		clock.Advance(time.Second)
	}

	main, err := loop.ReadEvents(filepath.Join(dir, "events.jsonl"), loop.EventQuery{})
	require.NoError(t, err)
	for _, r := range main {
		require.Equal(t, ingress.EventRejected, r.Event, "the flood rotated the event log until it held only refusals")
	}
	kept, err := loop.ReadEvents(auditPath, loop.EventQuery{})
	require.NoError(t, err)
	var names []string
	for _, r := range kept {
		names = append(names, r.Event)
	}
	require.Equal(t, []string{"graph.decision_recorded", "graph.forced", "graph.node_skipped", "routing.routed"}, names, "the audit log holds the decisions and nothing of the flood")
}

func TestAuditedNames(t *testing.T) {
	for name, want := range map[string]bool{
		"graph.forced": true, "graph.decision_unsigned": true, "routing.dropped": true, "control.command": true,
		"dispatch.spawned": true, "daemon.started": true,
		"webhook.rejected": false, "webhook.config_warning": false, "api.request": false, "poll.cycle": false,
	} {
		require.Equal(t, want, audited(name), name)
	}
}
