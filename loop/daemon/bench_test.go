package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/sessions"
)

const fixture = "../../../shared/fixtures/github-webhooks/issue_comment/created.payload.json"

// BenchmarkWebhookThroughput posts octokit's issue_comment.created from 8
// concurrent clients to the real receiver of an in-process loopd with the
// embedded JetStream queue (each a distinct delivery and comment, signed),
// and reports requests/s and the latency percentiles. Every 202 means the
// event was published and acknowledged by the stream. The dispatcher runs
// alongside, consuming what arrives (spawnOnUnmatched never: each event is
// dropped by policy after being read), and the event log and the audit log
// are written as `loopd run` writes them (a routing.routed line on the
// receiver's side, a dispatch.dropped line on the dispatcher's, each in
// both logs). cpu-µs/req is the process's CPU (clients included) from the
// first request until the dispatcher has drained the queue, per request:
// steadier than the wall-clock figures on a shared machine.
func BenchmarkWebhookThroughput(b *testing.B) {
	doc := benchFixture(b)
	base := shortdir.New(b) // holds the state root and its control socket
	cfg := benchConfig(base)
	cfg.Tmux.Socket = "theloop-bench-unused"
	sim, err := githubsim.Start(githubsim.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer sim.Close()
	d, err := daemon.New(cfg, daemon.Deps{Clock: graph.SystemClock{}, Integrations: nopIntegrations{}, Log: &bytes.Buffer{}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	<-d.Ready()
	defer func() { cancel(); <-done }()

	n := b.N
	bodies, sigs := signedComments(doc, n, 9_000_000_000)
	lat := make([]time.Duration, n)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	bad := postComments(d.WebhookURL(), bodies, sigs, 8, fmt.Sprintf("bench-%d", start.UnixNano()), lat)
	el := time.Since(start)
	// The dispatcher's share: wait until it has taken every event (the
	// last handled ones stay until their held-back acks are sent,
	// queue.AckDelay after the last).
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if p, err := d.Pending(context.Background()); err == nil && p == 0 {
			break
		}
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	if bad > 0 {
		b.Fatalf("%d requests were not answered 202", bad)
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/req")
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(n)/el.Seconds(), "req/s")
	b.ReportMetric(float64(lat[n/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[min(n-1, n*99/100)].Microseconds())/1000, "p99-ms")
}

// benchFixture is octokit's issue_comment.created payload, decoded.
func benchFixture(b *testing.B) map[string]any {
	raw, err := os.ReadFile(fixture)
	if err != nil {
		b.Skipf("fixture %s absent: %v", fixture, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		b.Fatal(err)
	}
	return doc
}

// benchConfig is the benchmarks' loopd under base: the fixture's repository
// and author, no reconcile pass, and the event log written as `loopd run`
// writes it.
func benchConfig(base string) daemon.Config {
	cfg := daemon.DefaultConfig()
	cfg.StateRoot = filepath.Join(base, "state")
	cfg.Webhook.Host, cfg.Webhook.Port = "127.0.0.1", 0
	cfg.Secret = []byte("s3cret")
	cfg.Repositories = []string{"Codertocat/Hello-World"}
	cfg.Routing.AuthorizedUsers = []string{"Codertocat"}
	cfg.ReconcileInterval = -1
	cfg.ClaudeEnv = &sessions.ClaudeEnvironment{}
	cfg.EventLog.Path = filepath.Join(cfg.StateRoot, "logs", "events.jsonl")
	return cfg
}

// signedComments are n distinct comments (ids from id0) of doc, signed.
func signedComments(doc map[string]any, n int, id0 int) ([][]byte, []string) {
	bodies, sigs := make([][]byte, n), make([]string, n)
	c := doc["comment"].(map[string]any)
	for i := range n {
		c["id"] = id0 + i
		c["updated_at"] = time.Unix(1_800_000_000+int64(i), 0).UTC().Format(time.RFC3339)
		bodies[i], _ = json.Marshal(doc)
		sigs[i] = githubsim.Signature256("s3cret", bodies[i])
	}
	return bodies, sigs
}

// postComments posts every body from clients concurrent clients (delivery
// ids prefix-i), noting each latency in lat when given; it returns how
// many were not answered 202.
func postComments(url string, bodies [][]byte, sigs []string, clients int, prefix string, lat []time.Duration) int64 {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 10 * time.Second}
	var next, bad atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bodies) {
					return
				}
				req, _ := http.NewRequest("POST", url, bytes.NewReader(bodies[i]))
				req.Header.Set("X-Hub-Signature-256", sigs[i])
				req.Header.Set("X-GitHub-Event", "issue_comment")
				req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("%s-%d", prefix, i))
				req.Header.Set("Content-Type", "application/json")
				t := time.Now()
				resp, err := client.Do(req)
				if lat != nil {
					lat[i] = time.Since(t)
				}
				if err != nil || resp.StatusCode != http.StatusAccepted {
					bad.Add(1)
				}
				if err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	return bad.Load()
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type nopIntegrations struct{}

func (nopIntegrations) Call(context.Context, graphOperation, map[string]any) (map[string]any, error) {
	return map[string]any{}, nil
}

type graphOperation = graph.Operation

// BenchmarkWebhookToPaste measures, per comment, the time from the
// stand-in's change (it sends the signed webhook at once) to the event
// prompt confirmed in the agent's tmux pane (the paste receipt included;
// no spawn settle: the sessions are already up). The knob is how many
// sessions are live meanwhile — sessions=1, 10 and 50 stand-in harnesses,
// each in a world of its own — with the comments going to them in turn,
// one at a time, so that p50 and p99 show whether the paste path grows
// with the sessions around it. "landlock" is one session under Landlock on
// loopd's one tmux server, side by side with the world.
//
//	go test ./loop/daemon -run '^$' -bench 'WebhookToPaste/world/sessions=10$' -benchtime 100x
func BenchmarkWebhookToPaste(b *testing.B) {
	for _, n := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("world/sessions=%d", n), func(b *testing.B) { benchWebhookToPaste(b, nil, n) })
	}
	b.Run("landlock/sessions=1", func(b *testing.B) { benchWebhookToPaste(b, landlockOnly, 1) })
}

func benchWebhookToPaste(b *testing.B, edit func(*daemon.Config), sessions int) {
	w := newWorld(b, edit)
	issues := make([]int, sessions)
	for i := range issues {
		issues[i] = w.openLabeled()
	}
	w.eventually(fmt.Sprintf("%d sessions spawned", sessions), func() bool { return w.spawns() >= sessions })
	w.waitIdle()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		marker := fmt.Sprintf("latency probe %d", i)
		start := time.Now()
		if _, err := w.sim.Comment(repoFull, issues[i%sessions], human, marker); err != nil {
			b.Fatal(err)
		}
		for {
			found := false
			for _, o := range w.observed(daemon.KindPaste, "event-prompt") {
				if bytes.Contains([]byte(o.Text), []byte(marker)) {
					found = true
				}
			}
			if found {
				break
			}
			if time.Since(start) > 30*time.Second {
				b.Fatalf("probe %d never pasted", i)
			}
			time.Sleep(200 * time.Microsecond)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
}

// BenchmarkEventsPageQuery is the dashboard's Events page reading loopd's
// log (dashSource.SearchEvents: loop.MergeEvents with the page's query)
// over a log of 100,000 lines, 500 work items and a dozen kinds: one item
// and a kind family, the newest 200, and a kind alone over every item.
func BenchmarkEventsPageQuery(b *testing.B) {
	path := filepath.Join(b.TempDir(), "events.jsonl")
	el, err := loop.OpenEventLog(path, "loopd", loop.EventLogOptions{})
	if err != nil {
		b.Fatal(err)
	}
	kinds := []string{"graph.advanced", "graph.blocked", "graph.started", "session.spawned", "session.delivered", "dispatch.handled", "dispatch.succeeded", "routing.routed", "outbox.performed", "control.command", "reconcile.pass", "daemon.started"}
	t0 := time.Now().Add(-100000 * time.Second)
	for i := 0; i < 100000; i++ {
		el.Emit(graph.LogEvent{Time: t0.Add(time.Duration(i) * time.Second), Name: kinds[i%len(kinds)], Level: graph.LevelInfo,
			Fields: []graph.Field{{Key: "work_item", Value: fmt.Sprintf("github:octo/demo#%d", i%500)}, {Key: "node", Value: "design"}}})
	}
	if err := el.Close(); err != nil {
		b.Fatal(err)
	}
	for _, q := range []struct {
		name string
		q    loop.EventQuery
	}{
		{"item+family", loop.EventQuery{WorkItem: "github:octo/demo#8", Event: "graph.*", Limit: 200}},
		{"kind", loop.EventQuery{Event: "graph.blocked", Limit: 200}},
		{"window", loop.EventQuery{Since: t0.Add(50000 * time.Second), Until: t0.Add(50600 * time.Second), Limit: 200}},
	} {
		b.Run(q.name, func(b *testing.B) {
			cpu0 := cpuTime()
			n := 0
			for b.Loop() {
				recs, err := loop.MergeEvents([]string{path}, q.q)
				if err != nil {
					b.Fatal(err)
				}
				n = len(recs)
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(n), "rows")
		})
	}
}
