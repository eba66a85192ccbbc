package ingress

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// countingSink is an in-memory Sink that keeps nothing but a count: the
// benchmark measures the receiver, not a store.
type countingSink struct{ n atomic.Int64 }

func (s *countingSink) Put(_ context.Context, _ *Event) error { s.n.Add(1); return nil }

// benchWriter is a reusable http.ResponseWriter.
type benchWriter struct {
	h    http.Header
	code int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }

// BenchmarkWebhook is one delivery through the receiver: bound and read
// the body, HMAC-SHA256, validate, parse, route (filter, dedup, repository
// bound, extraction, self-authored, authorization, control), hand-off to
// an in-memory Sink, mark the dedup cache, answer 202. Every delivery is a
// distinct comment (id and updated_at), as loadgen sends them, on GitHub's
// 15 KB issue_comment example.
func BenchmarkWebhook(b *testing.B) {
	raw := fixture(b, "issue_comment/created.payload.json")
	cfg := testConfig()
	const pool = 1 << 12
	bodies := make([][]byte, pool)
	sigs := make([][]string, pool)
	ids := make([][]string, pool)
	for i := range bodies {
		bodies[i] = mutate(b, raw, func(m map[string]any) {
			c := obj(m, "comment")
			c["id"] = 9_000_000_000 + i
			c["updated_at"] = time.Unix(1_800_000_000+int64(i), 0).UTC().Format(time.RFC3339)
		})
		sigs[i] = []string{Sign(cfg.Secret, bodies[i])}
		ids[i] = []string{"d-" + strconv.Itoa(i)}
	}
	sink := &countingSink{}
	// The daemon's queue publishes a copy, so request buffers are reused.
	r, err := NewReceiver(cfg, ReceiverDeps{Sink: sink, SinkCopiesPayload: true})
	if err != nil {
		b.Fatal(err)
	}
	u, _ := url.Parse("/gh-webhook")
	event := []string{"issue_comment"}
	ct := []string{"application/json"}
	rd := bytes.NewReader(nil)
	req := &http.Request{Method: http.MethodPost, URL: u, Header: http.Header{}, Body: readCloser{rd}}
	req = req.WithContext(context.Background())
	w := &benchWriter{h: http.Header{}}
	b.SetBytes(int64(len(bodies[0])))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % pool
		if k == 0 && i > 0 {
			b.StopTimer()
			r.router.dedup = NewDeduper(DefaultDedupSize, DefaultDedupWindow, nil)
			b.StartTimer()
		}
		rd.Reset(bodies[k])
		req.ContentLength = int64(len(bodies[k]))
		req.Header["X-Github-Event"] = event
		req.Header["X-Github-Delivery"] = ids[k]
		req.Header["X-Hub-Signature-256"] = sigs[k]
		req.Header["Content-Type"] = ct
		r.ServeHTTP(w, req)
		if w.code != http.StatusAccepted {
			b.Fatalf("status %d", w.code)
		}
	}
	b.StopTimer()
	if sink.n.Load() != int64(b.N) {
		b.Fatalf("sink kept %d of %d", sink.n.Load(), b.N)
	}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// BenchmarkWebhookParallel is BenchmarkWebhook from GOMAXPROCS goroutines
// sharing one receiver (dedup cache and parser pool contention).
func BenchmarkWebhookParallel(b *testing.B) {
	raw := fixture(b, "issue_comment/created.payload.json")
	cfg := testConfig()
	sink := &countingSink{}
	r, err := NewReceiver(cfg, ReceiverDeps{Sink: sink})
	if err != nil {
		b.Fatal(err)
	}
	r, err = NewReceiver(cfg, ReceiverDeps{Sink: sink, SinkCopiesPayload: true})
	if err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		u, _ := url.Parse("/gh-webhook")
		rd := bytes.NewReader(nil)
		req := (&http.Request{Method: http.MethodPost, URL: u, Header: http.Header{}, Body: readCloser{rd}}).WithContext(context.Background())
		w := &benchWriter{h: http.Header{}}
		body := append([]byte(nil), raw...)
		sig := []string{Sign(cfg.Secret, body)}
		for pb.Next() {
			// Distinct delivery ids, same content: the content key is
			// marked once, then every later delivery is a duplicate drop
			// after the full parse — the same work minus the Sink.
			n := seq.Add(1)
			rd.Reset(body)
			req.ContentLength = int64(len(body))
			req.Header["X-Github-Event"] = []string{"issue_comment"}
			req.Header["X-Github-Delivery"] = []string{"p-" + strconv.FormatInt(n, 10)}
			req.Header["X-Hub-Signature-256"] = sig
			r.ServeHTTP(w, req)
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	raw := fixture(b, "issue_comment/created.payload.json")
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if !validJSON(raw) {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkHMAC(b *testing.B) {
	raw := fixture(b, "issue_comment/created.payload.json")
	r, _ := NewReceiver(testConfig(), ReceiverDeps{Sink: &countingSink{}})
	sig := Sign([]byte("s3cret"), raw)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if !r.verify(sig, raw) {
			b.Fatal("bad")
		}
	}
}

func BenchmarkRoute(b *testing.B) {
	raw := fixture(b, "issue_comment/created.payload.json")
	r, _ := NewRouter(testConfig(), RouterDeps{})
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if ev, _, err := r.Route("issue_comment", "d", raw); err != nil || ev == nil {
			b.Fatal(err)
		}
	}
}
