package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/ops"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A credential in the answer of a failed integration call (a proxy that
// quotes the Authorization header, a service that names a foreign token),
// and in a line loopd logs or an event it records, never reaches the log
// output, the structured log or the event log: everything passes the one
// scrubber, fed with the configuration's secrets.
func TestCredentialsNeverReachTheLogsOrTheEventLog(t *testing.T) {
	const (
		ghToken      = "gh-token-value-the-daemon-holds-0001"
		foreign      = "xoxb-1234567890-foreignslacktoken"
		webhookValue = "webhook-secret-value-0123456789abcdef"
	)
	gh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"message":"Bad credentials: ` + r.Header.Get("Authorization") + ` (see also ` + foreign + `)"}`))
	}))
	defer gh.Close()

	cfg := DefaultConfig()
	cfg.StateRoot = t.TempDir()
	cfg.Secret = []byte(webhookValue)
	cfg.EventLog.Path = filepath.Join(cfg.StateRoot, "logs", "events.jsonl")
	cfg.Integrations = integrations.Config{GitHub: &integrations.GitHubConfig{Transport: integrations.TransportAPI,
		API: integrations.GitHubAPIConfig{BaseURL: gh.URL, TokenEnv: []string{"LOOPD_TEST_TOKEN"}}}}
	cfg.SecretEnvNames = []string{"LOOPD_TEST_TOKEN"}
	env := map[string]string{"LOOPD_TEST_TOKEN": ghToken}
	var lines, structured lockedBuffer
	d, err := New(cfg, Deps{
		Clock:  graph.SystemClock{},
		Env:    func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Log:    &lines,
		Logger: slog.New(slog.NewJSONHandler(&structured, nil)),
	})
	require.NoError(t, err)
	require.NoError(t, d.buildEvents())

	_, callErr := d.integ.Call(context.Background(), ops.GitHubAddComment, map[string]any{"ref": "github:octo/repo#1", "body": "hi"})
	require.Error(t, callErr)
	require.ErrorIs(t, callErr, integrations.ErrUnauthorized, "the error keeps its kind")
	require.NotContains(t, callErr.Error(), ghToken)
	require.NotContains(t, callErr.Error(), foreign)

	// Whatever a careless line quotes.
	d.logf("webhook signature check with %s failed; token %s; %s", webhookValue, ghToken, foreign)
	d.deps.Logger.Error("call failed", "err", callErr, "secret", webhookValue, "auth", "Bearer "+ghToken)
	d.sink.Emit(graph.LogEvent{Name: "test.leak", Level: graph.LevelWarning, Fields: []graph.Field{
		{Key: "error", Value: "upstream said: Bearer " + ghToken + " and " + foreign},
		{Key: "nested", Value: map[string]any{"list": []any{webhookValue}}},
	}})
	require.NoError(t, d.elog.Close())
	events, err := os.ReadFile(cfg.EventLog.Path)
	require.NoError(t, err)

	for name, out := range map[string]string{"log lines": lines.String(), "structured log": structured.String(), "event log": string(events)} {
		for _, secret := range []string{ghToken, foreign, webhookValue} {
			require.NotContains(t, out, secret, "%s holds a credential:\n%s", name, out)
		}
		require.Contains(t, out, "[redacted]", name)
	}
	require.Contains(t, string(events), "integration.call_failed", "the failed call was recorded, scrubbed")
}
