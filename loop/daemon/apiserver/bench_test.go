package apiserver_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
)

func benchSocket(b *testing.B, backend apiserver.Backend) *api.Client {
	sock := filepath.Join(privateDir(b), api.SocketName)
	ln, err := apiserver.ListenUnix(sock)
	if err != nil {
		b.Fatal(err)
	}
	serve(b, ln, mux(backend))
	return api.NewSocketClient(sock)
}

// BenchmarkSocketHealth is the control plane's floor: one round trip over
// the unix socket (keep-alive connection).
func BenchmarkSocketHealth(b *testing.B) {
	c := benchSocket(b, apiserver.Backend{})
	ctx := context.Background()
	for b.Loop() {
		if _, err := c.Raw(ctx, "GET", "/health", nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSocketCheck is POST /check --recompute of a work item over the
// socket: the full graph evaluation plus the round trip.
func BenchmarkSocketCheck(b *testing.B) {
	repo := b.TempDir()
	for rel, content := range map[string]string{
		".the-loop/harness-config.yaml":       "ticketing:\n  github: {owner: acme, repo: widgets}\n",
		"docs/specs/issue-42/requirements.md": "# R\n\n## Requirements\n\n1. x\n\n## Security considerations\n\nnone\n",
	} {
		p := filepath.Join(repo, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	c := benchSocket(b, apiserver.Backend{Graphs: &apiserver.Graphs{}})
	ctx := context.Background()
	req := api.CheckRequest{GraphRequest: api.GraphRequest{Repo: repo, WorkItem: "issue-42"}, Recompute: true}
	for b.Loop() {
		if _, err := c.Raw(ctx, "POST", "/check", nil, req); err != nil {
			b.Fatal(err)
		}
	}
}
