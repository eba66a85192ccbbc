package queue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop/daemon/dispatch"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
)

// commentIDMarker is the placeholder comment id each request overwrites
// with its own nine digits, so every request is a distinct change (as
// loadgen sends them) without re-encoding the payload.
const commentIDMarker = "987654321"

// webhookTemplate is GitHub's issue_comment.created example, compacted,
// with the comment id set to commentIDMarker, and the marker's offset.
func webhookTemplate(b *testing.B) ([]byte, int) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "shared", "fixtures", "github-webhooks", "issue_comment", "created.payload.json"))
	if errors.Is(err, os.ErrNotExist) {
		b.Skip("GitHub webhook fixtures not found beside the repository (../shared/fixtures); skipping")
	}
	if err != nil {
		b.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		b.Fatal(err)
	}
	doc["comment"].(map[string]any)["id"] = json.Number(commentIDMarker)
	body, err := json.Marshal(doc)
	if err != nil {
		b.Fatal(err)
	}
	at := bytes.Index(body, []byte(commentIDMarker))
	if at < 0 || bytes.Count(body, []byte(commentIDMarker)) != 1 {
		b.Fatal("comment id marker not found exactly once")
	}
	return body, at
}

// dropAtTriage drops every event in Triage (Handle is never reached).
type dropAtTriage struct{}

func (dropAtTriage) Triage(context.Context, *ingress.Event) error { return dispatch.ErrNoEffect }
func (dropAtTriage) Handle(context.Context, *ingress.Event) error { return dispatch.ErrNoEffect }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWebhookHTTP is loopd's webhook path end to end in one process:
// 8 keep-alive HTTP clients post signed issue_comment.created deliveries
// (each a new comment) to a real net/http server on loopback running the
// ingress receiver, whose Sink is the embedded JetStream queue (202 only
// after the publish is acknowledged). In "with-dispatcher" a dispatcher
// consumes the same stream at the same time with a handler that drops
// every event in its Triage, as loopd's intake does with comments on an
// item that is neither armed nor live (loadgen's load): fetch, decode, ack
// and removal from the stream happen as in loopd, which also writes its
// event log and reads its session registry. Metrics: req/s, p50/p99
// latency as the clients see it, and process CPU per request (clients
// included, so less noisy than the wall clock on a shared machine; with
// the dispatcher, counted until it has dropped every event).
// Loadgen against the built loopd measures the same path plus the
// daemon's event log and intake. "bare-202" is the floor the others are
// compared with in the same run: the same clients and requests against a
// net/http handler that reads the body and answers 202, nothing else.
func BenchmarkWebhookHTTP(b *testing.B) {
	b.Run("bare-202", func(b *testing.B) { benchWebhookHTTP(b, httpBench{bare: true}) })
	b.Run("ingress-only", func(b *testing.B) { benchWebhookHTTP(b, httpBench{}) })
	b.Run("with-dispatcher", func(b *testing.B) { benchWebhookHTTP(b, httpBench{withDispatcher: true}) })
	// A steady 2,000 webhooks a second, which this 2-core machine ingests
	// and dispatches side by side: the dispatcher should keep up, not
	// pace itself (paced-%: the share of the run it spent paced).
	b.Run("with-dispatcher-at-2k/s", func(b *testing.B) { benchWebhookHTTP(b, httpBench{withDispatcher: true, rate: 2000}) })
	b.Run("ingress-only-at-2k/s", func(b *testing.B) { benchWebhookHTTP(b, httpBench{rate: 2000}) })
}

// wholeBody is a request body the client's transport writes to the
// connection in one piece (io.WriterTo). Given a bytes.Reader in a
// NopCloser, net/http copies it through a new 32 KB buffer per request:
// 9.4 KB of the 54 KB each queued webhook allocated in this process, for
// a collector the server shares with its clients here and not behind a
// real webhook sender.
type wholeBody struct{ *bytes.Reader }

func (wholeBody) Close() error { return nil }

// httpBench is one case of BenchmarkWebhookHTTP.
type httpBench struct {
	bare, withDispatcher bool
	// rate caps the clients' requests per second together (0: as fast as
	// they are answered).
	rate int
}

func benchWebhookHTTP(b *testing.B, c httpBench) {
	tmpl, at := webhookTemplate(b)
	secret := []byte("s3cret")
	cfg := ingress.DefaultConfig()
	cfg.Secret = secret
	cfg.Repositories = []string{"Codertocat/Hello-World"}
	cfg.AuthorizedUsers = []string{"Codertocat"}
	var url string
	var q *queue.Queue
	if c.bare {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusAccepted)
		})}
		go func() { _ = hs.Serve(ln) }()
		defer hs.Close()
		url = "http://" + ln.Addr().String() + cfg.Path
	} else {
		var err error
		q, err = queue.Open(context.Background(), queue.Config{StoreDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		defer q.Close()
		recv, err := ingress.NewReceiver(cfg, ingress.ReceiverDeps{Sink: q, SinkCopiesPayload: true})
		if err != nil {
			b.Fatal(err)
		}
		srv := ingress.NewServer("127.0.0.1:0", recv)
		if err := srv.Start(); err != nil {
			b.Fatal(err)
		}
		defer srv.Close()
		url = "http://" + srv.Addr() + cfg.Path
	}

	var dispatched atomic.Int64
	// Time spent paced (nanoseconds), and when the current pacing began.
	var paced, pacedSince atomic.Int64
	stopDispatch := func() {}
	if c.withDispatcher {
		d, err := dispatch.New(q, dropAtTriage{},
			dispatch.Config{Observe: func(o dispatch.Observation) {
				switch o.Outcome {
				case dispatch.OutcomeDropped:
					dispatched.Add(1)
				case dispatch.OutcomePaced:
					pacedSince.Store(time.Now().UnixNano())
				case dispatch.OutcomeUnpaced:
					if t := pacedSince.Swap(0); t != 0 {
						paced.Add(time.Now().UnixNano() - t)
					}
				}
			}})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		stopDispatch = func() {
			cancel()
			if err := <-done; err != nil {
				b.Error(err)
			}
		}
	}
	defer func() { stopDispatch() }()

	const clients = 8
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	b.SetParallelism((clients + 1) / 2) // 8 goroutines at GOMAXPROCS 2
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, wall0 := cpuTime(), time.Now()
	b.RunParallel(func(pb *testing.PB) {
		body := slices.Clone(tmpl)
		var mine []time.Duration
		hdr := http.Header{"Content-Type": {"application/json"}, "X-Github-Event": {"issue_comment"}}
		for pb.Next() {
			n := next.Add(1)
			copy(body[at:at+len(commentIDMarker)], strconv.FormatInt(100_000_000+n, 10))
			req, err := http.NewRequest(http.MethodPost, url, wholeBody{bytes.NewReader(body)})
			if err != nil {
				b.Error(err)
				return
			}
			req.Header = hdr.Clone()
			req.Header["X-Hub-Signature-256"] = []string{ingress.Sign(secret, body)}
			req.Header["X-Github-Delivery"] = []string{"bench-" + strconv.FormatInt(n, 10)}
			if c.rate > 0 {
				// Request n goes out at n/rate seconds into the run, or at
				// once if the clients are behind.
				time.Sleep(time.Until(wall0.Add(time.Duration(n) * time.Second / time.Duration(c.rate))))
			}
			t := time.Now()
			resp, err := client.Do(req)
			d := time.Since(t)
			if err != nil {
				b.Error(err)
				return
			}
			if resp.StatusCode != http.StatusAccepted {
				msg, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				b.Errorf("status %d: %s", resp.StatusCode, msg)
				return
			}
			resp.Body.Close()
			mine = append(mine, d)
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	wall := time.Since(wall0)
	pacedInRun := paced.Load()
	if t := pacedSince.Load(); t != 0 {
		pacedInRun += time.Now().UnixNano() - t
	}
	backlog := int64(len(lat)) - dispatched.Load()
	if c.withDispatcher {
		// The dispatcher's share of the CPU is counted: wait until it
		// has dropped every event.
		for deadline := time.Now().Add(30 * time.Second); dispatched.Load() < int64(len(lat)) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(float64(len(lat))/wall.Seconds(), "req/s")
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(lat)), "cpu-µs/req")
	if c.withDispatcher {
		// How far the dispatcher was behind when the last 202 went out
		// (cpu-µs/req includes its catching up).
		b.ReportMetric(float64(backlog), "backlog")
		b.ReportMetric(100*float64(pacedInRun)/float64(wall), "paced-%")
	}
}
