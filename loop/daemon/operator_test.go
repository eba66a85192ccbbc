package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
)

// The helper process's inputs: which socket, what to send.
const (
	peerSocketEnv = "LOOPD_TEST_PEER_SOCKET"
	peerMethodEnv = "LOOPD_TEST_PEER_METHOD"
	peerPathEnv   = "LOOPD_TEST_PEER_PATH"
	peerBodyEnv   = "LOOPD_TEST_PEER_BODY"
)

// TestHelperSocketPeer is not a test: run as a child process (see
// peerCall), it makes one request on the control socket and prints the
// answer's status and body.
func TestHelperSocketPeer(t *testing.T) {
	sock := os.Getenv(peerSocketEnv)
	if sock == "" {
		t.Skip("a helper process for TestControlSocketKnowsItsCaller")
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	var body io.Reader
	if b := os.Getenv(peerBodyEnv); b != "" {
		body = strings.NewReader(b)
	}
	req, err := http.NewRequest(os.Getenv(peerMethodEnv), "http://loopd"+os.Getenv(peerPathEnv), body)
	require.NoError(t, err)
	res, err := hc.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	fmt.Printf("\nSTATUS %d\nBODY %s\n", res.StatusCode, bytes.ReplaceAll(b, []byte("\n"), nil))
}

// peerCall runs this test binary as a separate process that calls the
// control socket — under a sandbox launcher when sandboxed: a process
// whose second command-line word is sandbox.LauncherArg (a shell reading a
// script of that name), the mark InSandbox looks for among a peer's
// ancestors. It returns the answer's status and body.
func peerCall(t *testing.T, sandboxed bool, sock, method, path string, body any) (int, string) {
	t.Helper()
	bin, err := os.Executable()
	require.NoError(t, err)
	var js []byte
	if body != nil {
		js, err = json.Marshal(body)
		require.NoError(t, err)
	}
	var cmd *exec.Cmd
	if sandboxed {
		dir := t.TempDir()
		// Not exec'd: the shell stays the client's parent.
		script := `"$LOOPD_TEST_BIN" -test.run='^TestHelperSocketPeer$'` + "\nrc=$?\nexit $rc\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, sandbox.LauncherArg), []byte(script), 0o700))
		cmd = exec.Command("/bin/sh", sandbox.LauncherArg)
		cmd.Dir = dir
	} else {
		cmd = exec.Command(bin, "-test.run=^TestHelperSocketPeer$")
	}
	cmd.Env = append(os.Environ(), "LOOPD_TEST_BIN="+bin, peerSocketEnv+"="+sock, peerMethodEnv+"="+method, peerPathEnv+"="+path, peerBodyEnv+"="+string(js))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	status, rest := 0, ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "STATUS "); ok {
			status, _ = strconv.Atoi(v)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "BODY "); ok {
			rest = v
		}
	}
	require.NotZero(t, status, "the helper printed no status: %s", out)
	return status, rest
}

// osUser is the identity loopd records for a socket peer of this test's OS
// user when no dashboard operator is configured.
func osUser(t testing.TB) string {
	u, err := user.Current()
	require.NoError(t, err)
	return "os-user:" + u.Username
}

// TestControlSocketKnowsItsCaller drives the running daemon's control
// socket from real child processes (issue 20): one below a sandbox
// launcher — as an agent's shell is — is refused on every route it tries,
// and its force moves nothing; an operator's process is let in and its
// force is recorded in all four places under the identity the socket
// proved (the OS user), not the actor its body claims.
func TestControlSocketKnowsItsCaller(t *testing.T) {
	w := newWorld(t, nil)
	sock := w.d.ControlSocket()
	n := w.openLabeled()
	w.eventually("the session", func() bool { return w.spawns() == 1 })
	w.waitIdle()
	id := fmt.Sprintf("issue-%d", n)
	cwd := w.checkout(n)
	require.Equal(t, "phase-selection", w.state(n).CurrentNode)
	logPath := filepath.Join(cwd, "docs", "specs", id, "execution-log.md")
	require.NoError(t, os.MkdirAll(filepath.Dir(logPath), 0o755))
	require.NoError(t, os.WriteFile(logPath, []byte("# Execution log\n"), 0o644))
	// The reason carries a token pasted by mistake: none of the four
	// places keeps it.
	token := "ghp_" + strings.Repeat("K", 36)
	force := api.ForceRequest{GraphRequest: api.GraphRequest{Repo: cwd, WorkItem: id}, To: "design", Reason: "agreed in the planning meeting " + token}

	// Inside an agent session: refused everywhere, reads and /metrics
	// included.
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{"POST", api.Prefix + "/graph/force", force},
		{"POST", api.Prefix + "/graph/skip", api.SkipRequest{GraphRequest: force.GraphRequest, Nodes: []string{"requirements-approval"}, Reason: "x"}},
		{"POST", api.Prefix + "/sessions/control", api.ControlRequest{Ref: w.item(n).String(), Verb: "stop"}},
		{"GET", api.Prefix + "/sessions", nil},
		{"GET", "/metrics", nil},
		{"POST", "/mcp", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}},
	} {
		code, body := peerCall(t, true, sock, tc.method, tc.path, tc.body)
		require.Equal(t, http.StatusForbidden, code, "%s %s: %s", tc.method, tc.path, body)
		require.Contains(t, body, "is inside an agent session", tc.path)
	}
	require.Equal(t, "phase-selection", w.state(n).CurrentNode, "the sandboxed force moved nothing")
	require.Zero(t, w.count("graph.forced"))

	// The operator's process: a body actor naming someone else is refused…
	claimed := force
	claimed.Actor = "alice"
	code, body := peerCall(t, false, sock, "POST", api.Prefix+"/graph/force", claimed)
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, "the actor comes from the caller's identity")
	require.Zero(t, w.count("graph.forced"))

	// …and without one the force goes through, recorded as the OS user.
	me := osUser(t)
	code, body = peerCall(t, false, sock, "POST", api.Prefix+"/graph/force", force)
	require.Equal(t, http.StatusOK, code, body)
	st := w.state(n)
	require.Equal(t, "design", st.CurrentNode)
	require.Equal(t, me, st.Forced[len(st.Forced)-1].Actor, "graph-state.json")
	require.Equal(t, []any{me}, w.eventField("graph.forced", "actor"), "the event")
	w.d.FlushLogs() // the log is written in the background
	events, err := os.ReadFile(w.cfg.EventLog.Path)
	require.NoError(t, err)
	require.Contains(t, string(events), `"actor":"`+me+`"`, "the event log")
	logged, err := os.ReadFile(logPath)
	require.NoError(t, err)
	require.Contains(t, string(logged), "- **By:** "+me+"\n", "execution-log.md")
	require.Contains(t, string(logged), "- **Reason:** agreed in the planning meeting [redacted]\n", "execution-log.md")
	stateFile, err := os.ReadFile(filepath.Join(cwd, "docs", "specs", id, "graph-state.json"))
	require.NoError(t, err)
	cs, err := w.sim.Comments(repoFull, n)
	require.NoError(t, err)
	found := false
	for _, c := range cs {
		found = found || strings.Contains(c.Body, "`phase-selection` → `design` by "+me)
		require.NotContains(t, c.Body, token, "the ticket")
	}
	for what, text := range map[string]string{"execution-log.md": string(logged), "the event log": string(events), "graph-state.json": string(stateFile)} {
		require.NotContains(t, text, token, what)
	}
	require.True(t, found, "the ticket comment names %s", me)
}
