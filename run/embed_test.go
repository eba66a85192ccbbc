package run_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/sessions"
)

// auditRunner is what an embedder might write: a run.Runner defined outside
// package run that records every command before handing it to the real
// runner. It proves the interface and its types are reachable from another
// module (nothing here imports an internal package).
type auditRunner struct {
	next run.Runner
	mu   sync.Mutex
	seen []string
}

func (a *auditRunner) Run(ctx context.Context, c run.Cmd) (run.Result, error) {
	a.mu.Lock()
	a.seen = append(a.seen, c.String())
	a.mu.Unlock()
	return a.next.Run(ctx, c)
}

func (a *auditRunner) commands() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

var _ run.Runner = (*auditRunner)(nil)

func TestEmbedderRunnerDrivesTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: the embedder's runner is tested against the real tmux")
	}
	audit := &auditRunner{next: run.Exec{}}
	socket := fmt.Sprintf("theloop-embed-%d", time.Now().UnixNano())
	tm, err := sessions.NewTmux(sessions.TmuxConfig{Socket: socket}, audit)
	require.NoError(t, err)

	live, err := tm.Probe(context.Background(), "loop-github-octo-repo-7")
	require.NoError(t, err)
	require.Equal(t, sessions.LivenessAbsent, live, "no server runs on a fresh socket")

	cmds := audit.commands()
	require.NotEmpty(t, cmds, "the probe went through the embedder's runner")
	require.True(t, strings.HasPrefix(cmds[0], "tmux -L "+socket), "got %q", cmds[0])
}

func TestEmbedderRunnerDrivesIntegrations(t *testing.T) {
	// GitHub is integrations/githubsim, the repository's one GitHub
	// stand-in: it accepts the vault's token only.
	gh, err := githubsim.Start(githubsim.Config{Token: "from-the-vault"})
	require.NoError(t, err)
	defer gh.Close()
	require.NoError(t, gh.AddRepo("octo/repo", githubsim.RepoOptions{FirstNumber: 7}))
	_, err = gh.OpenIssue("octo/repo", "dana", "Embed theloop", "")
	require.NoError(t, err)

	// The token comes from a secret-store command, which integrations runs
	// through Deps.Runner: here, the embedder's.
	audit := &auditRunner{next: vault{}}
	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		Transport: integrations.TransportAPI,
		API:       integrations.GitHubAPIConfig{BaseURL: gh.URL(), TokenCommand: []string{"vault", "read", "github-token"}},
	}}, integrations.Deps{
		Env:    func(string) (string, bool) { return "", false },
		Runner: audit,
	})
	require.NoError(t, err)

	got, err := set.Call(context.Background(), ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#7"})
	require.NoError(t, err)
	require.Equal(t, "Embed theloop", got["title"])
	require.True(t, gh.Requests()[0].Authenticated, "the vault's token reached GitHub")
	require.Equal(t, []string{"vault read github-token"}, audit.commands())
}

// vault stands in for a secret store the embedder reaches through its own
// runner; it answers one command and refuses any other.
type vault struct{}

func (vault) Run(_ context.Context, c run.Cmd) (run.Result, error) {
	if c.String() != "vault read github-token" {
		return run.Result{ExitCode: -1}, fmt.Errorf("%s: %w", c.Name, run.ErrNotFound)
	}
	return run.Result{Stdout: []byte("from-the-vault\n")}, nil
}
