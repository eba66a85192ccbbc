package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
	"github.com/theloop-dev/theloop/sessions"
)

type nopSessions struct{}

func (nopSessions) ListSessions(context.Context, string) ([]sessions.Record, error) { return nil, nil }
func (nopSessions) Session(_ context.Context, ref string) (sessions.Record, error) {
	return sessions.Record{}, fmt.Errorf("%w: %s", sessions.ErrNoRecord, ref)
}
func (nopSessions) ControlSession(_ context.Context, ref, verb, actor string, _ bool) (api.ControlResult, error) {
	return api.ControlResult{Ref: ref, Verb: verb, Effect: "noop"}, nil
}
func (nopSessions) AttachCommand(context.Context, string) (string, error) {
	return "", sessions.ErrNoRecord
}

type nopQueue struct{}

func (nopQueue) Stats(context.Context) (queue.Stats, error)              { return queue.Stats{}, nil }
func (nopQueue) DeadLetters(context.Context) ([]queue.DeadLetter, error) { return nil, nil }
func (nopQueue) Replay(_ context.Context, seq uint64) error {
	return fmt.Errorf("%d: %w", seq, queue.ErrNotFound)
}

var routes = []string{"/check", "/graph/status", "/sessions/control", "/queue/dead/replay"}

// FuzzRequests posts arbitrary bodies to the read-only and control routes
// (never to the verbs that write a repository's state): the answer is
// always JSON, never a 500, and nothing panics.
func FuzzRequests(f *testing.F) {
	repo := f.TempDir()
	_ = os.MkdirAll(filepath.Join(repo, "docs", "specs", "issue-42"), 0o755)
	for _, seed := range []string{
		`{"repo":"` + repo + `","workItem":"issue-42","recompute":true}`,
		`{"repo":"/nonexistent","workItem":"issue-42"}`,
		`{"repo":"` + repo + `","workItem":"../../etc"}`,
		`{"ref":"github:o/r#1","verb":"pause"}`,
		`{"seq":7}`, `{}`, `[]`, `null`, `{"repo":1}`, ``,
	} {
		for i := range routes {
			f.Add(uint8(i), []byte(seed))
		}
	}
	h := http.NewServeMux()
	a, err := apiserver.New(apiserver.Config{Clock: graph.SystemClock{}}, apiserver.Backend{Graphs: &apiserver.Graphs{}, Sessions: nopSessions{}, Queue: nopQueue{}})
	if err != nil {
		f.Fatal(err)
	}
	h.Handle(api.Prefix+"/", a)
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		route := routes[int(which)%len(routes)]
		var probe struct {
			Repo string `json:"repo"`
		}
		if json.Unmarshal(body, &probe) == nil && probe.Repo != "" && probe.Repo != repo && probe.Repo != "/nonexistent" {
			return // only the fixture repository is read
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", api.Prefix+route, bytes.NewReader(body))
		req = req.WithContext(apiserver.WithCaller(req.Context(), apiserver.Caller{Identity: "os-user:fuzz", Transport: "unix"}))
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %q: %d %s", route, body, rec.Code, rec.Body.String())
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %q: not JSON: %s", route, body, rec.Body.String())
		}
	})
}
