package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
)

// TestAttentionVerbCallsTheSocket: `loopctl attention` prints loopd's
// "needs you" list, oldest first, as a table (how long, kind, work item,
// since, why on one line), as the API's JSON with --format json, through
// --jq and --template, filtered by --kind (an unknown kind refused with
// the valid ones named), and says so when nothing waits.
func TestAttentionVerbCallsTheSocket(t *testing.T) {
	since := time.Date(2026, 5, 4, 8, 0, 0, 0, time.UTC)
	list := []api.AttentionItem{
		{Ref: "github:acme/widgets#42", Title: "CSV export", Kind: "gate", Why: "design-approval waits for an authorized person's decision", Since: since, WaitingSeconds: 2*86400 + 3*3600},
		{Ref: "github:acme/widgets#43", Kind: "question", Why: "Blue\nor green?", Since: since.Add(time.Hour), WaitingSeconds: 3700},
		{Ref: "github:acme/widgets#44", Kind: "capacity", Why: "cluster node b declined it: at capacity", Since: since.Add(2 * time.Hour), WaitingSeconds: 45},
	}
	var empty bool
	sock := serveAPI(t, apiserver.Backend{Attention: func(context.Context) ([]api.AttentionItem, error) {
		if empty {
			return nil, nil
		}
		return list, nil
	}})
	f, io := testFactory(t, t.TempDir(), nil)
	run := func(args ...string) int {
		io.out.Reset()
		io.err.Reset()
		return Main(append([]string{"loopctl", "attention"}, append(args, "--socket", sock)...), f)
	}

	require.Equal(t, exitOK, run(), io.err.String())
	lines := strings.Split(strings.TrimRight(io.out.String(), "\n"), "\n")
	require.Len(t, lines, 4, io.out.String())
	require.Regexp(t, `^WAITING +KIND +WORK ITEM +SINCE +WHY$`, lines[0])
	require.Regexp(t, `^2d03h +gate +github:acme/widgets#42 +2026-05-04T08:00:00Z +design-approval waits for an authorized person's decision$`, lines[1])
	require.Regexp(t, `^1h01m +question +github:acme/widgets#43 +2026-05-04T09:00:00Z +Blue or green\?$`, lines[2], "a question stays on its row")
	require.Regexp(t, `^45s +capacity +github:acme/widgets#44 `, lines[3])
	require.NotContains(t, io.out.String(), "\x1b[", "no colour when not a terminal")

	require.Equal(t, exitOK, run("--format", "json"), io.err.String())
	want, err := api.NewSocketClient(sock).Raw(context.Background(), "GET", api.AttentionPath, nil, nil)
	require.NoError(t, err)
	require.JSONEq(t, string(want), io.out.String())

	require.Equal(t, exitOK, run("--jq", `.[] | select(.waitingSeconds > 3600) | .ref`), io.err.String())
	require.Equal(t, "github:acme/widgets#42\ngithub:acme/widgets#43\n", io.out.String())
	require.Equal(t, exitOK, run("--template", `{{range .}}{{.kind}} {{.ref}}{{"\n"}}{{end}}`), io.err.String())
	require.Equal(t, "gate github:acme/widgets#42\nquestion github:acme/widgets#43\ncapacity github:acme/widgets#44\n", io.out.String())

	require.Equal(t, exitOK, run("--kind", "question", "--kind", "capacity", "--jq", ".[].ref"), io.err.String())
	require.Equal(t, "github:acme/widgets#43\ngithub:acme/widgets#44\n", io.out.String())
	require.Equal(t, exitRefused, run("--kind", "gates"))
	require.Contains(t, io.err.String(), `kind "gates": use one of gate, question, parked, dead-session, spawn-failed, capacity`)

	empty = true
	require.Equal(t, exitOK, run(), io.err.String())
	require.Equal(t, "nothing waits on you\n", io.out.String())
	require.Equal(t, exitOK, run("--format", "json"), io.err.String())
	require.JSONEq(t, "[]", io.out.String())
}
