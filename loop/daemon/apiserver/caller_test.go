package apiserver_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
)

// actorSessions records the actor each control verb was applied for.
type actorSessions struct {
	nopSessions
	mu     sync.Mutex
	actors []string
}

func (s *actorSessions) ControlSession(_ context.Context, ref, verb, actor string, _ bool) (api.ControlResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.actors = append(s.actors, actor)
	return api.ControlResult{Ref: ref, Verb: verb, Effect: "noop"}, nil
}

func (s *actorSessions) recorded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.actors...)
}

// serveSocket serves h on a real unix socket with policy deciding who its
// peers are, the way loopd serves its control plane.
func serveSocket(t *testing.T, policy apiserver.PeerPolicy, h http.Handler) string {
	t.Helper()
	sock := filepath.Join(privateDir(t), api.SocketName)
	ln, err := apiserver.ListenUnix(sock)
	require.NoError(t, err)
	srv := &http.Server{Handler: apiserver.Authenticated(h), ConnContext: apiserver.PeerContext(policy)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}

// TestSocketPeerIsTheActor: the socket reads the connecting process's
// credentials (this test process: its uid and pid), the policy names it,
// and that name — not the body's — is the actor a control verb records. A
// body actor naming someone else is refused with 403 saying where the
// actor comes from.
func TestSocketPeerIsTheActor(t *testing.T) {
	var mu sync.Mutex
	var peers []apiserver.Peer
	policy := func(p apiserver.Peer) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		peers = append(peers, p)
		return "os-user:tester", nil
	}
	ss := &actorSessions{}
	sock := serveSocket(t, policy, mux(apiserver.Backend{Sessions: ss}))
	c := api.NewSocketClient(sock)
	ctx := context.Background()

	var res api.ControlResult
	require.NoError(t, c.Do(ctx, "POST", "/sessions/control", nil, api.ControlRequest{Ref: "github:o/r#1", Verb: "pause"}, &res))
	require.NoError(t, c.Do(ctx, "POST", "/sessions/control", nil, api.ControlRequest{Ref: "github:o/r#1", Verb: "resume", Actor: "os-user:tester"}, &res), "naming oneself is allowed")
	err := c.Do(ctx, "POST", "/sessions/control", nil, api.ControlRequest{Ref: "github:o/r#1", Verb: "stop", Actor: "alice"}, &res)
	var ae *api.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusForbidden, ae.Status)
	require.Contains(t, ae.Detail, `actor "alice": the actor comes from the caller's identity, which is "os-user:tester"`)
	require.Equal(t, []string{"os-user:tester", "os-user:tester"}, ss.recorded(), "the refused stop was never applied")

	mu.Lock()
	first := peers[0]
	mu.Unlock()
	require.Equal(t, apiserver.Peer{UID: os.Getuid(), GID: os.Getgid(), PID: os.Getpid()}, first, "SO_PEERCRED names this process")

	// The graph verbs that act for an operator bind the actor the same way
	// (checked before the repository is opened).
	g := serveSocket(t, policy, mux(apiserver.Backend{Graphs: &apiserver.Graphs{}}))
	for _, tc := range []struct {
		path string
		body any
	}{
		{"/graph/force", api.ForceRequest{GraphRequest: api.GraphRequest{Repo: "/nonexistent", WorkItem: "issue-1"}, To: "design", Reason: "r", Actor: "alice"}},
		{"/graph/skip", api.SkipRequest{GraphRequest: api.GraphRequest{Repo: "/nonexistent", WorkItem: "issue-1"}, Nodes: []string{"design"}, Reason: "r", Actor: "alice"}},
	} {
		_, err := api.NewSocketClient(g).Raw(ctx, "POST", tc.path, nil, tc.body)
		require.ErrorAs(t, err, &ae, tc.path)
		require.Equal(t, http.StatusForbidden, ae.Status, tc.path)
		require.Contains(t, ae.Detail, "the actor comes from the caller's identity", tc.path)
	}
}

// TestRefusedPeersAreRefusedEverywhere: a peer the policy refuses gets 403
// with the policy's reason on every route, reads included.
func TestRefusedPeersAreRefusedEverywhere(t *testing.T) {
	ss := &actorSessions{}
	sock := serveSocket(t, func(p apiserver.Peer) (string, error) {
		return "", errors.New("process is inside an agent session")
	}, mux(apiserver.Backend{Sessions: ss, Graphs: &apiserver.Graphs{}, Attention: func(context.Context) ([]api.AttentionItem, error) {
		panic("a refused caller never reaches the list")
	}}))
	c := api.NewSocketClient(sock)
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/health", nil},
		{"GET", "/sessions", nil},
		{"GET", api.AttentionPath, nil},
		{"POST", "/sessions/control", api.ControlRequest{Ref: "github:o/r#1", Verb: "stop"}},
		{"POST", "/graph/force", api.ForceRequest{GraphRequest: api.GraphRequest{Repo: "/x", WorkItem: "issue-1"}, To: "design", Reason: "r"}},
	} {
		_, err := c.Raw(context.Background(), tc.method, tc.path, nil, tc.body)
		var ae *api.APIError
		require.ErrorAs(t, err, &ae, tc.path)
		require.Equal(t, http.StatusForbidden, ae.Status, tc.path)
		require.Contains(t, ae.Detail, "refuses this caller: process is inside an agent session", tc.path)
	}
	require.Empty(t, ss.recorded())

	// No policy at all refuses every peer (fail closed).
	sock = serveSocket(t, nil, mux(apiserver.Backend{Sessions: ss}))
	_, err := api.NewSocketClient(sock).Raw(context.Background(), "GET", "/health", nil, nil)
	var ae *api.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusForbidden, ae.Status)
}

// TestOperatorVerbsNeedAnAuthenticatedCaller: served with no transport
// vouching for the caller, the verbs that record an actor refuse (403)
// rather than record a name from the body; the token's holder is recorded
// as TokenIdentity.
func TestOperatorVerbsNeedAnAuthenticatedCaller(t *testing.T) {
	ss := &actorSessions{}
	sock := filepath.Join(privateDir(t), api.SocketName)
	ln, err := apiserver.ListenUnix(sock)
	require.NoError(t, err)
	serve(t, ln, mux(apiserver.Backend{Sessions: ss}))
	c := api.NewSocketClient(sock)
	_, err = c.Raw(context.Background(), "POST", "/sessions/control", nil, api.ControlRequest{Ref: "github:o/r#1", Verb: "stop", Actor: "alice"})
	var ae *api.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusForbidden, ae.Status)
	require.Contains(t, ae.Detail, "no transport authenticated the caller")

	tln, err := apiserver.ListenTCP("127.0.0.1:0", "s3cret")
	require.NoError(t, err)
	serve(t, tln, apiserver.RequireToken("s3cret", apiserver.Authenticated(mux(apiserver.Backend{Sessions: ss}))))
	var res api.ControlResult
	require.NoError(t, api.NewTCPClient("http://"+tln.Addr().String(), "s3cret", nil).Do(context.Background(), "POST", "/sessions/control", nil, api.ControlRequest{Ref: "github:o/r#1", Verb: "pause"}, &res))
	require.Equal(t, []string{apiserver.TokenIdentity}, ss.recorded())
}

var _ apiserver.Sessions = (*actorSessions)(nil)
