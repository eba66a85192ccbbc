package ingress

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// floodResult is what slowFlood saw.
type floodResult struct {
	statuses map[string]int // "503", "401", ..., "stalled" (sent all but the last byte, no answer)
	release  func()         // closes the stalled connections
}

// slowFlood opens n connections to url, each POSTing a body that declares
// declared bytes under a well-formed but wrong signature, sends all but the
// last byte (or until answered) and waits. It returns once every connection
// is answered or stalled; release closes the stalled ones.
func slowFlood(t testing.TB, addr string, n int, declared int64) floodResult {
	res := floodResult{statuses: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	done := make(chan struct{})
	piece := make([]byte, 64<<10)
	for i := range n {
		wg.Add(1)
		go func() {
			outcome := "error"
			settle := func() { mu.Lock(); res.statuses[outcome]++; mu.Unlock(); wg.Done() }
			stalled := false
			defer func() {
				if !stalled {
					settle()
				}
			}()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			fmt.Fprintf(conn, "POST /gh-webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: flood-%d\r\n"+
				"X-Hub-Signature-256: sha256=%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", i, strings.Repeat("0", 64), declared)
			answered := make(chan string, 1)
			go func() {
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					answered <- "reset"
					return
				}
				answered <- strconv.Itoa(resp.StatusCode)
			}()
			for sent := int64(0); sent < declared-1; {
				select {
				case outcome = <-answered:
					conn.Close()
					return
				default:
				}
				k, err := conn.Write(piece[:min(int64(len(piece)), declared-1-sent)])
				sent += int64(k)
				if err != nil {
					outcome = <-answered
					conn.Close()
					return
				}
			}
			select {
			case outcome = <-answered:
				conn.Close()
				return
			case <-time.After(200 * time.Millisecond):
			}
			outcome, stalled = "stalled", true
			settle()
			<-done
			conn.Close()
		}()
	}
	wg.Wait()
	res.release = sync.OnceFunc(func() { close(done) })
	return res
}

// TestSlowUnsignedFloodIsBounded: 100 connections each declaring a 25 MB
// body under a wrong signature, sending all but the last byte and waiting,
// hold no more than the unverified budget; the rest are answered 503 at
// once; a signed delivery still gets through; the budget is whole again
// when they go.
func TestSlowUnsignedFloodIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("sends ~60 MB over loopback")
	}
	cfg := testConfig()
	r, err := NewReceiver(cfg, ReceiverDeps{Sink: newMemSink()})
	require.NoError(t, err)
	srv := httptest.NewServer(r)
	defer srv.Close()

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := slowFlood(t, srv.Listener.Addr().String(), 100, DefaultMaxBodyBytes)
	defer res.release()
	var during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&during)
	t.Logf("outcomes %v; budget peak %d MB of %d MB; heap in use %d MB before, %d MB with the flood stalled",
		res.statuses, r.budget.highWater()>>20, cfg.withDefaults().MaxUnverifiedBytes>>20, before.HeapInuse>>20, during.HeapInuse>>20)

	require.LessOrEqual(t, r.budget.highWater(), int64(DefaultMaxUnverifiedBytes))
	require.Less(t, during.HeapInuse, before.HeapInuse+2*DefaultMaxUnverifiedBytes,
		"the stalled flood holds about the budget, not 100 × 25 MB")
	require.Equal(t, 100, res.statuses["503"]+res.statuses["stalled"], "every connection is refused with 503 or holds budget: %v", res.statuses)
	require.LessOrEqual(t, res.statuses["stalled"], int(DefaultMaxUnverifiedBytes/DefaultMaxBodyBytes))
	require.Positive(t, res.statuses["503"])

	// A signed delivery still fits in what is left.
	comment := fixture(t, "issue_comment/created.payload.json")
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/gh-webhook", bytes.NewReader(comment))
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", "legit-1")
	req.Header.Set("X-Hub-Signature-256", Sign(cfg.Secret, comment))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	res.release()
	require.Eventually(t, func() bool { return r.budget.inUse() == 0 }, 10*time.Second, 10*time.Millisecond,
		"every chunk goes back when the connections close")
	require.Equal(t, int64(res.statuses["503"]), r.Stats().Rejected["unverified-budget-spent"])
}

// TestUnsignedBodyIsNotRead: a request without a well-formed signature is
// answered 401 before its body is read, and holds no budget.
func TestUnsignedBodyIsNotRead(t *testing.T) {
	r, err := NewReceiver(testConfig(), ReceiverDeps{Sink: newMemSink()})
	require.NoError(t, err)
	srv := httptest.NewServer(r)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	// Declares 25 MB and sends none of it: the answer comes anyway.
	fmt.Fprintf(conn, "POST /gh-webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Delivery: d1\r\nContent-Length: %d\r\n\r\n", DefaultMaxBodyBytes)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Zero(t, r.budget.highWater())
}

// BenchmarkSlowUnsignedFlood runs the attack of issue 27 once per
// iteration — 100 connections, 25 MB declared, all but the last byte sent,
// a wrong signature — and reports the process's peak RSS and the highest
// heap in use sampled while it ran.
//
//	go test ./ingress -run '^$' -bench SlowUnsignedFlood -benchtime 1x
func BenchmarkSlowUnsignedFlood(b *testing.B) {
	r, err := NewReceiver(testConfig(), ReceiverDeps{Sink: newMemSink()})
	require.NoError(b, err)
	srv := httptest.NewServer(r)
	defer srv.Close()
	var peakHeap atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peakHeap.Load() {
				peakHeap.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	for b.Loop() {
		res := slowFlood(b, srv.Listener.Addr().String(), 100, DefaultMaxBodyBytes)
		res.release()
		b.Logf("outcomes %v", res.statuses)
	}
	close(stop)
	<-sampled
	b.ReportMetric(float64(peakHeap.Load())/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(vmHWM())/(1<<20), "peak-RSS-MB")
}

// vmHWM is the process's peak resident set (Linux), 0 elsewhere.
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestRejectedLinesAreRateLimited: a flood of unsigned POSTs over a real
// socket writes one webhook.rejected line per reason per RejectLogEvery,
// each carrying the rejections it stands for; Stats counts every one.
func TestRejectedLinesAreRateLimited(t *testing.T) {
	clock := &stepClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	log := &logSink{}
	r, err := NewReceiver(testConfig(), ReceiverDeps{Sink: newMemSink(), Log: log, Clock: clock})
	require.NoError(t, err)
	srv := httptest.NewServer(r)
	defer srv.Close()
	post := func(id, sig string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/gh-webhook", strings.NewReader(`{}`))
		req.Header.Set("X-GitHub-Delivery", id)
		if sig != "" {
			req.Header.Set("X-Hub-Signature-256", sig)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	}
	lines := func() (out []map[string]any) {
		log.mu.Lock()
		defer log.mu.Unlock()
		for _, e := range log.events {
			if e.Name != EventRejected {
				continue
			}
			m := map[string]any{}
			for _, f := range e.Fields {
				m[f.Key] = f.Value
			}
			out = append(out, m)
		}
		return out
	}
	for i := range 500 {
		post(fmt.Sprintf("u-%d", i), "")
	}
	wrong := "sha256=" + strings.Repeat("0", 64)
	post("w-0", wrong)
	require.Equal(t, []map[string]any{
		{"reason": "invalid-signature", "count": int64(1), "delivery_id": "u-0"},
	}, lines(), "one line for the first rejection, the rest of the window is counted")

	clock.advance(RejectLogEvery - time.Millisecond)
	post("u-500", "")
	require.Len(t, lines(), 1, "still inside the window")
	clock.advance(time.Millisecond)
	post("u-501", wrong)
	got := lines()
	require.Len(t, got, 2)
	require.Equal(t, map[string]any{"reason": "invalid-signature", "count": int64(502), "delivery_id": "u-501"}, got[1],
		"the next line stands for every rejection since the first")
	require.Equal(t, int64(503), r.Stats().Rejected["invalid-signature"])

	// Another reason has a window of its own.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/gh-webhook", strings.NewReader(`{}`))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "missing-delivery-id", lines()[2]["reason"])
}

// TestFormEncodedWebhook: GitHub's application/x-www-form-urlencoded
// deliveries are verified over the raw form body and routed from its
// payload field, over a real socket.
func TestFormEncodedWebhook(t *testing.T) {
	cfg := testConfig()
	comment := fixture(t, "issue_comment/created.payload.json")
	form := []byte("payload=" + url.QueryEscape(string(comment)))
	for _, tc := range []struct {
		name, ct string
		body     []byte
		sig      string
		want     int
	}{
		{"signed form", "application/x-www-form-urlencoded", form, Sign(cfg.Secret, form), http.StatusAccepted},
		{"content type with parameters", "Application/X-WWW-Form-Urlencoded; charset=utf-8", form, Sign(cfg.Secret, form), http.StatusAccepted},
		{"signature over the JSON, not the raw body", "application/x-www-form-urlencoded", form, Sign(cfg.Secret, comment), http.StatusUnauthorized},
		{"no payload field", "application/x-www-form-urlencoded", []byte("x=1"), Sign(cfg.Secret, []byte("x=1")), http.StatusBadRequest},
		{"two payload fields", "application/x-www-form-urlencoded", append(append([]byte{}, form...), "&payload=%7B%7D"...),
			Sign(cfg.Secret, append(append([]byte{}, form...), "&payload=%7B%7D"...)), http.StatusBadRequest},
		{"bad escape", "application/x-www-form-urlencoded", []byte("payload=%zz"), Sign(cfg.Secret, []byte("payload=%zz")), http.StatusBadRequest},
		{"payload not JSON", "application/x-www-form-urlencoded", []byte("payload=hello"), Sign(cfg.Secret, []byte("payload=hello")), http.StatusBadRequest},
		{"form body sent as JSON", "application/json", form, Sign(cfg.Secret, form), http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := newMemSink()
			r, err := NewReceiver(cfg, ReceiverDeps{Sink: sink, SinkCopiesPayload: true})
			require.NoError(t, err)
			srv := httptest.NewServer(r)
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/gh-webhook", bytes.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.ct)
			req.Header.Set("X-GitHub-Event", "issue_comment")
			req.Header.Set("X-GitHub-Delivery", "form-1")
			req.Header.Set("X-Hub-Signature-256", tc.sig)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, tc.want, resp.StatusCode)
			if tc.want == http.StatusAccepted {
				evs := sink.all()
				require.Len(t, evs, 1)
				require.JSONEq(t, string(comment), string(evs[0].Payload))
				require.Equal(t, "Codertocat", evs[0].Actor)
			}
		})
	}
}

// TestReceiverRefusesSecretsGitHubCannotMatch: a blank secret, or one with
// whitespace at either end, would answer every delivery 401.
func TestReceiverRefusesSecretsGitHubCannotMatch(t *testing.T) {
	for secret, ok := range map[string]bool{"s3cret": true, "a b": true, "s3cret\n": false, " s3cret": false, " \t\n": false} {
		cfg := testConfig()
		cfg.Secret = []byte(secret)
		_, err := NewReceiver(cfg, ReceiverDeps{Sink: newMemSink()})
		if ok {
			require.NoError(t, err, "%q", secret)
			continue
		}
		require.ErrorIs(t, err, ErrInvalidConfig, "%q", secret)
		require.ErrorContains(t, err, "THE_LOOP_GH_WEBHOOK_SECRET")
	}
}
