package ingress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations"
)

// The fake gh: a sh script that re-executes this test binary in "fake gh"
// mode, which behaves like `gh api --include`: it forwards the request to
// the ghFake server named in the script, prints the answer in gh's
// --include format, and exits 1 above 299 as gh does. It lets the poller
// run over integrations' cli transport, the real `gh` argv included.

const fakeGhEnv = "INGRESS_FAKE_GH_UPSTREAM"

// fakeGhToken is the credential the fake gh is logged in with (the world's
// GitHub accepts it, as newGHFake configures).
const fakeGhToken = "tok"

func TestMain(m *testing.M) {
	if up := os.Getenv(fakeGhEnv); up != "" {
		os.Exit(fakeGhMain(up, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func fakeGhMain(upstream string, args []string) int {
	if len(args) == 0 || args[0] != "api" {
		fmt.Fprintln(os.Stderr, "fake gh: only `gh api` is supported")
		return 2
	}
	method, path := http.MethodGet, ""
	var body io.Reader
	for i := 1; i < len(args); i++ {
		switch args[i] {
		case "--include":
		case "--method", "-X":
			i++
			method = args[i]
		case "--hostname", "-H":
			i++
		case "--input":
			i++
			b, _ := io.ReadAll(os.Stdin)
			body = bytes.NewReader(b)
		default:
			path = args[i]
		}
	}
	req, err := http.NewRequest(method, strings.TrimRight(upstream, "/")+"/"+strings.TrimLeft(path, "/"), body)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	req.Header.Set("Authorization", "token "+fakeGhToken) // gh's own login, never from theloop
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error connecting:", err)
		return 1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("HTTP/1.1 %s\r\n", resp.Status)
	_ = resp.Header.Write(os.Stdout)
	fmt.Print("\r\n")
	os.Stdout.Write(b)
	if resp.StatusCode > 299 {
		fmt.Fprintf(os.Stderr, "gh: HTTP %d\n", resp.StatusCode)
		return 1
	}
	return 0
}

// fakeGhScript writes the gh script pointing at upstream and returns its path.
func fakeGhScript(t *testing.T, upstream string) string {
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "gh")
	script := fmt.Sprintf("#!/bin/sh\n%s=%q exec %q \"$@\"\n", fakeGhEnv, upstream, exe)
	require.NoError(t, os.WriteFile(path, []byte(script), 0o755))
	return path
}

// TestPollerOverGhCLI runs discovery, comments and closure through
// integrations' cli transport (`gh api`), not the REST client.
func TestPollerOverGhCLI(t *testing.T) {
	clock := &stepClock{t: time.Now().UTC()} // one clock for GitHub, the router and the poller
	gh := newGHFake(t, clock)
	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		Transport: integrations.TransportCLI, MaxAttempts: 2, TimeoutSeconds: 20,
		CLI: integrations.GitHubCLIConfig{Binary: fakeGhScript(t, gh.sim.URL())},
	}}, integrations.Deps{Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }})
	require.NoError(t, err)
	router, err := NewRouter(testConfig(), RouterDeps{Clock: clock})
	require.NoError(t, err)
	sink := newMemSink()
	store := NewPortableStore(t.TempDir(), nil)
	p, err := NewPoller(PollerConfig{Sources: []PollSource{{Repos: []string{"octo/repo"}}}},
		PollerDeps{GitHub: set, Sink: sink, Router: router, Store: store, Clock: clock})
	require.NoError(t, err)

	n := gh.open("alice", autoLabel) // #15
	st, err := p.Reconcile(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, st.Presences, "%+v", st)
	id := gh.comment(15, "alice", "/the-loop pause")
	_, err = p.Reconcile(context.Background())
	require.NoError(t, err)
	// An edit is seen through `gh api` as through the REST client; an
	// unchanged comment is not offered again.
	at := gh.edit(id, "/the-loop pause, please")
	for range 2 {
		_, err = p.Reconcile(context.Background())
		require.NoError(t, err)
	}
	require.NoError(t, gh.sim.CloseIssue(simRepo, n, "alice"))
	st, err = p.Reconcile(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, st.Closures)
	evs := sink.all()
	require.Equal(t, []string{
		"issues/labeled/" + evs[0].DeliveryID,
		"issue_comment/created/poll-comment-" + id,
		"issue_comment/edited/poll-comment-" + id + "@" + at,
		"issues/closed/poll-close-github:octo/repo#15-closed",
	}, deliveries(evs))
	require.Equal(t, CmdPause, evs[1].Control.Command)
	require.Nil(t, evs[2].Control, "an edit never executes")
	require.Equal(t, "/the-loop pause, please", evs[2].Comments[0].Body)
}
