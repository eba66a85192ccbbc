package outbox_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/outbox"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// BenchmarkClaimToLabel measures what issue 20 asks of the outbox: from a
// claim in the session (an fsync'd intent) through loopd's verdict to the
// label request answered by GitHub (an httptest stand-in), with the
// performer as loopd runs it (default 100 ms poll). It reports p50 and p99.
//
//	go test ./loop/daemon/outbox -run '^$' -bench ClaimToLabel -benchtime 40x
func BenchmarkClaimToLabel(b *testing.B) {
	arrived := make(chan time.Time, 16)
	sim, err := githubsim.Start(githubsim.Config{Token: "tok", OnRequest: func(r githubsim.Request) {
		if r.Method != "GET" && strings.Contains(r.Path, "/labels") {
			select {
			case arrived <- time.Now():
			default:
			}
		}
	}})
	require.NoError(b, err)
	defer sim.Close()
	_, err = sim.OpenIssue(theRepo, "dana", "one", "")
	require.NoError(b, err)
	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		Transport: integrations.TransportAPI, MaxAttempts: 1, TimeoutSeconds: 5,
		API: integrations.GitHubAPIConfig{BaseURL: sim.URL()},
	}}, integrations.Deps{Env: func(k string) (string, bool) { return "tok", k == "GH_TOKEN" }})
	require.NoError(b, err)
	root := b.TempDir()
	p, err := outbox.New(outbox.Config{StateRoot: root}, outbox.Deps{Integrations: set, Sink: &graphtest.Sink{}, Clock: graph.SystemClock{},
		Sessions: outbox.SessionsFunc(func(string) ([]workitem.Ref, error) {
			r, _ := workitem.Parse(issue1)
			return []workitem.Ref{r}, nil
		}),
		// The recompute's answer: the phase label of the node the claim
		// entered (alternating, as the claims below do).
		Judge: outbox.JudgeFunc(func(_ context.Context, in loop.Intent) (outbox.Verdict, error) {
			label := "loop:" + in.Claim().To
			return outbox.Verdict{Effects: []outbox.Effect{{Op: ops.GitHubSetLabels, Summary: "label " + label,
				Args: map[string]any{"ref": issue1, "labels": []any{label}, "replacePrefix": "loop:"}}}}, nil
		})})
	require.NoError(b, err)
	p.Start()
	defer p.Close()
	rec := loop.NewRecorder(loop.ManagedSession{SessionID: sid, WorkItem: "issue-1", StateRoot: root}, "graph complete", nil)

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		to := []string{"design", "code"}[i%2]
		start := time.Now()
		rec.Emit(graph.LogEvent{Name: graph.EventAdvanced, Fields: []graph.Field{{Key: "work_item", Value: issue1}, {Key: "node", Value: "n"}, {Key: "to", Value: to}}})
		require.NoError(b, rec.Err())
		select {
		case at := <-arrived:
			lat = append(lat, at.Sub(start))
		case <-time.After(5 * time.Second):
			b.Fatalf("claim %d: the label did not reach the ticket within 5s", i)
		}
		// Drain the remove of the previous label, if the transport made one.
		time.Sleep(5 * time.Millisecond)
		for len(arrived) > 0 {
			<-arrived
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) time.Duration { return lat[min(len(lat)-1, int(f*float64(len(lat))))] }
	b.ReportMetric(float64(q(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(q(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}
