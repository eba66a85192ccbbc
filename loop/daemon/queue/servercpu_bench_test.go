package queue_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
)

// serveEnv names the server a re-executed test binary runs
// (BenchmarkWebhookServerCPU): its value is the case, the store directory
// follows in serveDirEnv.
const (
	serveEnv    = "THELOOP_QUEUE_BENCH_SERVE"
	serveDirEnv = "THELOOP_QUEUE_BENCH_DIR"
	// serveProfileEnv, set in the benchmark's environment, names a file
	// the server writes its CPU profile to (the last case run wins).
	serveProfileEnv = "THELOOP_QUEUE_BENCH_CPUPROFILE"
)

// The comment id of GitHub's issue_comment.created example: it appears in
// the comment's id and its URLs; every request rewrites all of them with
// nine digits of its own so that each is a distinct change.
const rawCommentID = "492700400"

func TestMain(m *testing.M) {
	if mode := os.Getenv(serveEnv); mode != "" {
		if err := serveForBench(mode, os.Getenv(serveDirEnv)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveForBench is the server side of BenchmarkWebhookServerCPU, in a
// process of its own so that its CPU is counted apart from the clients':
// it prints its address, serves the webhook path and GET /usage (the
// process's user+sys CPU in µs and its heap allocations so far), and exits
// when stdin closes.
func serveForBench(mode, dir string) error {
	secret := []byte("s3cret")
	cfg := ingress.DefaultConfig()
	cfg.Secret = secret
	cfg.Repositories = []string{"Codertocat/Hello-World"}
	cfg.AuthorizedUsers = []string{"Codertocat"}
	var webhook http.Handler
	switch mode {
	case "bare-202":
		webhook = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusAccepted)
		})
	case "publish-only", "queued":
		q, err := queue.Open(context.Background(), queue.Config{StoreDir: dir})
		if err != nil {
			return err
		}
		defer q.Close()
		if mode == "queued" {
			recv, err := ingress.NewReceiver(cfg, ingress.ReceiverDeps{Sink: q, SinkCopiesPayload: true})
			if err != nil {
				return err
			}
			webhook = recv
			break
		}
		// The durable hand-off alone: the body read as the bare handler
		// reads it, then kept in the stream as the receiver keeps it
		// (Put waits for the store's acknowledgement) — no signature, no
		// parse, no routing.
		var bufs sync.Pool
		webhook = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			bp, _ := bufs.Get().(*bytes.Buffer)
			if bp == nil {
				bp = new(bytes.Buffer)
			}
			bp.Reset()
			_, _ = bp.ReadFrom(r.Body)
			ev := &ingress.Event{Event: "issue_comment", DeliveryID: r.Header.Get("X-Github-Delivery"), Repo: "Codertocat/Hello-World", Payload: bp.Bytes()}
			if err := q.Put(r.Context(), ev); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
			} else {
				w.WriteHeader(http.StatusAccepted)
			}
			bufs.Put(bp)
		})
	default:
		return fmt.Errorf("unknown case %q", mode)
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+cfg.Path, webhook)
	mux.HandleFunc("GET /usage", func(w http.ResponseWriter, _ *http.Request) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(w, "%d %d %d\n", cpuTime().Microseconds(), ms.Mallocs, ms.TotalAlloc)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: mux}
	go func() { _ = hs.Serve(ln) }()
	if path := os.Getenv(serveProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Println(ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return hs.Close()
}

// BenchmarkWebhookServerCPU is the server's CPU per signed, queued webhook
// beside its floors, measured in the same run: the server runs in a
// process of its own (this test binary, re-executed), the 8 keep-alive
// clients in the benchmark's, and the server's user+sys CPU is read from
// it before and after the requests, so the clients' work is not counted.
// The body is GitHub's issue_comment.created example as GitHub sends it
// (15.5 KB), each request a new comment. Cases: "bare-202", a net/http
// handler that reads the body and answers 202 (the floor of any
// receiver); "publish-only", that handler plus the event kept in the
// embedded JetStream stream as the receiver keeps it (the durable
// hand-off's floor: Put and its acknowledgement, nothing else); "queued",
// the ingress receiver on the same stream (HMAC, validation, routing for a
// served repository, Put, the 202). Metrics: server CPU per request,
// server heap allocations and bytes per request, p50/p99 as the clients
// see them, req/s.
//
//	go test ./loop/daemon/queue -run '^$' -bench WebhookServerCPU -benchtime 4000x
func BenchmarkWebhookServerCPU(b *testing.B) {
	for _, mode := range []string{"bare-202", "publish-only", "queued"} {
		b.Run(mode, func(b *testing.B) { benchServerCPU(b, mode) })
	}
}

func benchServerCPU(b *testing.B, mode string) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "shared", "fixtures", "github-webhooks", "issue_comment", "created.payload.json"))
	if errors.Is(err, os.ErrNotExist) {
		b.Skip("GitHub webhook fixtures not found beside the repository (../shared/fixtures); skipping")
	}
	if err != nil {
		b.Fatal(err)
	}
	var at []int
	for off := 0; ; {
		i := bytes.Index(raw[off:], []byte(rawCommentID))
		if i < 0 {
			break
		}
		at = append(at, off+i)
		off += i + len(rawCommentID)
	}
	if len(at) == 0 {
		b.Fatal("comment id not found in the example payload")
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	srv := exec.Command(exe)
	srv.Env = append(os.Environ(), serveEnv+"="+mode, serveDirEnv+"="+b.TempDir())
	stdin, err := srv.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := srv.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); _ = srv.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("server did not start: %v", err)
	}
	base := "http://" + strings.TrimSpace(line)
	url := base + ingress.DefaultConfig().Path

	const clients = 8
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	usage := func() (cpuMicros, mallocs, bytes int64) {
		resp, err := client.Get(base + "/usage")
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := fmt.Fscan(resp.Body, &cpuMicros, &mallocs, &bytes); err != nil {
			b.Fatal(err)
		}
		return
	}
	secret := []byte("s3cret")
	var next atomic.Int64
	post := func(body []byte) (time.Duration, error) {
		n := next.Add(1)
		id := strconv.FormatInt(100_000_000+n, 10)
		for _, o := range at {
			copy(body[o:o+len(rawCommentID)], id)
		}
		req, err := http.NewRequest(http.MethodPost, url, wholeBody{bytes.NewReader(body)})
		if err != nil {
			return 0, err
		}
		req.ContentLength = int64(len(body)) // as GitHub sends it (not chunked)
		req.Header = http.Header{
			"Content-Type":        {"application/json"},
			"X-Github-Event":      {"issue_comment"},
			"X-Hub-Signature-256": {ingress.Sign(secret, body)},
			"X-Github-Delivery":   {"bench-" + id},
		}
		t := time.Now()
		resp, err := client.Do(req)
		d := time.Since(t)
		if err != nil {
			return 0, err
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return 0, fmt.Errorf("status %d: %s", resp.StatusCode, msg)
		}
		return d, nil
	}
	// Warm the connections and the server's pools, untimed.
	warm := slices.Clone(raw)
	for range 2 * clients {
		if _, err := post(warm); err != nil {
			b.Fatal(err)
		}
	}

	var mu sync.Mutex
	var lat []time.Duration
	b.SetParallelism((clients + 1) / 2) // 8 goroutines at GOMAXPROCS 2
	b.ResetTimer()
	cpu0, mallocs0, bytes0 := usage()
	wall0 := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		body := slices.Clone(raw)
		var mine []time.Duration
		for pb.Next() {
			d, err := post(body)
			if err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, d)
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	wall := time.Since(wall0)
	cpu1, mallocs1, bytes1 := usage()
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	n := float64(len(lat))
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(float64(cpu1-cpu0)/n, "server-cpu-µs/req")
	b.ReportMetric(float64(mallocs1-mallocs0)/n, "server-allocs/req")
	b.ReportMetric(float64(bytes1-bytes0)/n, "server-B/req")
	b.ReportMetric(n/wall.Seconds(), "req/s")
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
}
