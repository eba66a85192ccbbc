package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
)

// The example as shipped, against the real control-plane server on a
// real unix socket under a state root (docs/embedding.md).
func TestReportAgainstTheControlPlane(t *testing.T) {
	root, err := os.MkdirTemp("", "apic") // short: a unix socket path is ≤ 104 bytes
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	logPath := filepath.Join(root, "events.jsonl")
	el, err := loop.OpenEventLog(logPath, "loopd", loop.EventLogOptions{})
	require.NoError(t, err)
	el.Emit(graph.LogEvent{Name: "dispatch.spawned", Fields: []graph.Field{{Key: "work_item", Value: "github:octo/demo#4"}}})
	el.Emit(graph.LogEvent{Name: "dispatch.spawned", Fields: []graph.Field{{Key: "work_item", Value: "github:octo/demo#5"}}})
	require.NoError(t, el.Close())

	srv, err := apiserver.New(apiserver.Config{Clock: graph.SystemClock{}}, apiserver.Backend{
		EventLogPath: logPath,
		WorkItems: func(context.Context) ([]api.WorkItem, error) {
			return []api.WorkItem{{Ref: "github:octo/demo#4", Node: "design-approval", State: "waiting"}}, nil
		},
		Attention: func(context.Context) ([]api.AttentionItem, error) {
			return []api.AttentionItem{{Ref: "github:octo/demo#4", Kind: "gate", Why: "design-approval waits for a decision"}}, nil
		},
		Status: func(context.Context) api.Status { return api.Status{Version: "v-test", LiveSessions: 1} },
	})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(api.Prefix+"/", srv)
	ln, err := net.Listen("unix", api.SocketPath(root))
	require.NoError(t, err)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })

	var out bytes.Buffer
	require.NoError(t, report(context.Background(), api.NewSocketClient(api.SocketPath(root)), &out))
	require.Equal(t, `1 work items
  github:octo/demo#4 at design-approval (waiting)
1 waiting on a human
  github:octo/demo#4: gate (design-approval waits for a decision)
event dispatch.spawned ×2
loopd v-test, 1 live sessions
`, out.String())

	_, err = api.NewSocketClient(filepath.Join(root, "nobody.sock")).WorkItems(context.Background())
	require.ErrorIs(t, err, api.ErrUnreachable)
}
