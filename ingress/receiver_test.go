package ingress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type delivery struct {
	method  string
	path    string
	event   string
	id      string
	body    []byte
	sig     string // "" = sign with the test secret; "-" = no header
	chunked bool
}

func (d delivery) request(secret []byte) *http.Request {
	method := d.method
	if method == "" {
		method = http.MethodPost
	}
	path := d.path
	if path == "" {
		path = "/gh-webhook"
	}
	var body io.Reader = bytes.NewReader(d.body)
	if d.chunked {
		body = io.MultiReader(bytes.NewReader(d.body)) // unknown length
	}
	req := httptest.NewRequest(method, path, body)
	if d.chunked {
		req.ContentLength = -1
	}
	if d.event != "" {
		req.Header.Set("X-GitHub-Event", d.event)
	}
	if d.id != "" {
		req.Header.Set("X-GitHub-Delivery", d.id)
	}
	switch d.sig {
	case "":
		req.Header.Set("X-Hub-Signature-256", Sign(secret, d.body))
	case "-":
	default:
		req.Header.Set("X-Hub-Signature-256", d.sig)
	}
	return req
}

func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestReceiverContract walks every row of docs/daemon.md §2.1 and the changes
// of docs/decisions.md §10, with GitHub's own example payloads.
func TestReceiverContract(t *testing.T) {
	comment := fixture(t, "issue_comment/created.payload.json")
	cfg := testConfig()
	cfg.MaxBodyBytes = 64 << 10
	big := bytes.Repeat([]byte(" "), 70<<10)
	bigJSON := append(append([]byte(`{"a":"`), bytes.Repeat([]byte("x"), 70<<10)...), `"}`...)

	tests := []struct {
		name   string
		d      delivery
		code   int
		body   string
		kept   int
		header map[string]string
	}{
		{"healthz", delivery{method: http.MethodGet, path: "/healthz"}, 200, `{"status":"ok"}`, 0, nil},
		{"health with trailing slash", delivery{method: http.MethodGet, path: "/health/"}, 200, `{"status":"ok"}`, 0, nil},
		{"other GET", delivery{method: http.MethodGet, path: "/gh-webhook"}, 404, `{"status":"not found"}`, 0, nil},
		{"POST elsewhere", delivery{path: "/hook", event: "issue_comment", id: "d1", body: comment}, 404, `{"status":"not found"}`, 0, nil},
		{"POST with a query string", delivery{path: "/gh-webhook?x=1", event: "issue_comment", id: "d1", body: comment}, 404, `{"status":"not found"}`, 0, nil},
		{"POST path with trailing slash", delivery{path: "/gh-webhook/", event: "issue_comment", id: "d-slash", body: comment}, 202, ``, 1, nil},
		{"no signature", delivery{event: "issue_comment", id: "d1", body: comment, sig: "-"}, 401, `{"status":"invalid signature"}`, 0, nil},
		{"wrong signature", delivery{event: "issue_comment", id: "d1", body: comment, sig: Sign([]byte("other"), comment)}, 401, `{"status":"invalid signature"}`, 0, nil},
		{"signature of another body", delivery{event: "issue_comment", id: "d1", body: comment, sig: Sign([]byte("s3cret"), []byte("{}"))}, 401, `{"status":"invalid signature"}`, 0, nil},
		{"legacy sha1 header only", delivery{event: "issue_comment", id: "d1", body: comment, sig: "sha1=0123"}, 401, `{"status":"invalid signature"}`, 0, nil},
		{"signature not hex", delivery{event: "issue_comment", id: "d1", body: comment, sig: "sha256=" + strings.Repeat("z", 64)}, 401, `{"status":"invalid signature"}`, 0, nil},
		{"signature upper-case prefix", delivery{event: "issue_comment", id: "d1", body: comment, sig: strings.Replace(Sign([]byte("s3cret"), comment), "sha256", "SHA256", 1)}, 401, `{"status":"invalid signature"}`, 0, nil},
		{"signature in upper-case hex", delivery{event: "issue_comment", id: "d1", body: comment, sig: "sha256=" + strings.ToUpper(strings.TrimPrefix(Sign([]byte("s3cret"), comment), "sha256="))}, 401, `{"status":"invalid signature"}`, 0, nil},
		{"invalid JSON", delivery{event: "issue_comment", id: "d1", body: []byte(`{"action":`)}, 400, `{"status":"invalid payload"}`, 0, nil},
		{"JSON that is not an object", delivery{event: "issue_comment", id: "d1", body: []byte(`[1,2]`)}, 400, `{"status":"invalid payload"}`, 0, nil},
		{"accepted", delivery{event: "issue_comment", id: "d-ok", body: comment}, 202, ``, 1, nil},
		{"chunked body accepted", delivery{event: "issue_comment", id: "d-chunk", body: comment, chunked: true}, 202, ``, 1, nil},
		{"empty body is {}", delivery{event: "issue_comment", id: "d-empty", body: nil}, 202, ``, 0, nil},
		{"missing delivery id", delivery{event: "issue_comment", body: comment}, 400, `{"status":"missing delivery id"}`, 0, nil},
		{"delivery id with a space", delivery{event: "issue_comment", id: "a b", body: comment}, 400, `{"status":"missing delivery id"}`, 0, nil},
		{"over the cap by Content-Length", delivery{event: "issue_comment", id: "d-big", body: big}, 413, `{"status":"payload too large"}`, 0, nil},
		{"over the cap chunked", delivery{event: "issue_comment", id: "d-big2", body: bigJSON, chunked: true}, 413, `{"status":"payload too large"}`, 0, nil},
		{"event outside the filter", delivery{event: "push", id: "d-push", body: comment}, 202, ``, 0, nil},
		{"ping", delivery{event: "ping", id: "d-ping", body: []byte(`{"zen":"Keep it logically awesome."}`)}, 202, ``, 0, nil},
		{"PUT", delivery{method: http.MethodPut, event: "issue_comment", id: "d1", body: comment}, 405, `{"status":"method not allowed"}`, 0, map[string]string{"Allow": "GET, POST"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sink := newMemSink()
			r, err := NewReceiver(cfg, ReceiverDeps{Sink: sink})
			require.NoError(t, err)
			rec := serve(r, tc.d.request(cfg.Secret))
			require.Equal(t, tc.code, rec.Code, rec.Body.String())
			if tc.code == http.StatusAccepted {
				require.Empty(t, rec.Body.String(), "202 carries no body (keep-alive for clients that do not read it)")
				require.Equal(t, "0", rec.Header().Get("Content-Length"))
			} else {
				require.JSONEq(t, tc.body, rec.Body.String())
				require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			}
			require.Len(t, sink.all(), tc.kept)
			for k, v := range tc.header {
				require.Equal(t, v, rec.Header().Get(k))
			}
		})
	}
}

func TestReceiverEventFields(t *testing.T) {
	comment := fixture(t, "issue_comment/created.payload.json")
	sink := newMemSink()
	r, err := NewReceiver(testConfig(), ReceiverDeps{Sink: sink})
	require.NoError(t, err)
	rec := serve(r, delivery{event: "issue_comment", id: "72d3162e-cc78-11e3-81ab-4c9367dc0958", body: comment}.request([]byte("s3cret")))
	require.Equal(t, 202, rec.Code)
	evs := sink.all()
	require.Len(t, evs, 1)
	ev := evs[0]
	require.Equal(t, "issue_comment", ev.Event)
	require.Equal(t, "created", ev.Action)
	require.Equal(t, "72d3162e-cc78-11e3-81ab-4c9367dc0958", ev.DeliveryID)
	require.Equal(t, "Codertocat/Hello-World", ev.Repo)
	require.Len(t, ev.WorkItems, 1)
	require.Equal(t, "github:Codertocat/Hello-World#1", ev.WorkItems[0].String())
	require.Equal(t, "Codertocat", ev.Actor)
	require.Len(t, ev.Comments, 1)
	require.Equal(t, "492700400", ev.Comments[0].ID)
	require.Equal(t, "2019-05-15T15:20:21Z", ev.Comments[0].UpdatedAt)
	require.True(t, strings.HasPrefix(ev.Comments[0].Body, "You are totally right!"))
	require.Nil(t, ev.Control)
	require.Equal(t, SourceWebhook, ev.Source)
	require.Equal(t, comment, []byte(ev.Payload))
	require.False(t, ev.ReceivedAt.IsZero())
}

func TestReceiverDuplicatesAndSinkOutage(t *testing.T) {
	comment := fixture(t, "issue_comment/created.payload.json")
	cfg := testConfig()
	cfg.RetryAfter = 7 * time.Second
	sink := newMemSink()
	r, err := NewReceiver(cfg, ReceiverDeps{Sink: sink})
	require.NoError(t, err)
	send := func(id string, body []byte) *httptest.ResponseRecorder {
		return serve(r, delivery{event: "issue_comment", id: id, body: body}.request(cfg.Secret))
	}

	// The sink is down: 503 + Retry-After, nothing remembered.
	sink.setDown(true)
	rec := send("d-1", comment)
	require.Equal(t, 503, rec.Code)
	require.Equal(t, "7", rec.Header().Get("Retry-After"))
	require.Empty(t, sink.all())

	// GitHub redelivers under the same id once the sink is back: kept.
	sink.setDown(false)
	require.Equal(t, 202, send("d-1", comment).Code)
	require.Len(t, sink.all(), 1)

	// A redelivery of a kept id: 202, no second event (the receiver's
	// cache answers without asking the sink).
	require.Equal(t, 202, send("d-1", comment).Code)
	require.Len(t, sink.all(), 1)

	// The same comment under another delivery id (a second hook): one
	// change, one event.
	require.Equal(t, 202, send("d-2", comment).Code)
	require.Len(t, sink.all(), 1)

	// An edit of the comment is a new change.
	edited := mutate(t, comment, func(m map[string]any) {
		m["action"] = "edited"
		obj(m, "comment")["updated_at"] = "2019-05-15T16:00:00Z"
	})
	require.Equal(t, 202, send("d-3", edited).Code)
	require.Len(t, sink.all(), 2)

	// A sink that already holds the delivery (after a restart): 202.
	r2, err := NewReceiver(cfg, ReceiverDeps{Sink: sink})
	require.NoError(t, err)
	rec = serve(r2, delivery{event: "issue_comment", id: "d-3", body: edited}.request(cfg.Secret))
	require.Equal(t, 202, rec.Code)
	require.Len(t, sink.all(), 2)
	require.EqualValues(t, 1, r2.Stats().Duplicates)

	st := r.Stats()
	require.EqualValues(t, 1, st.Unavailable)
	require.EqualValues(t, 2, st.Kept)
	require.EqualValues(t, 1, st.Dropped[DropDuplicate])
	require.EqualValues(t, 1, st.Dropped[DropDuplicateContent])
}

func TestReceiverSlowSinkIs503(t *testing.T) {
	comment := fixture(t, "issue_comment/created.payload.json")
	cfg := testConfig()
	cfg.SinkTimeout = 20 * time.Millisecond
	sink := newMemSink()
	sink.delay = time.Second
	r, err := NewReceiver(cfg, ReceiverDeps{Sink: sink})
	require.NoError(t, err)
	rec := serve(r, delivery{event: "issue_comment", id: "slow", body: comment}.request(cfg.Secret))
	require.Equal(t, 503, rec.Code)
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
}

func TestReceiverRefusesToStartWithoutSecret(t *testing.T) {
	cfg := testConfig()
	cfg.Secret = nil
	_, err := NewReceiver(cfg, ReceiverDeps{Sink: newMemSink()})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.Contains(t, err.Error(), "--insecure-accept-unsigned")

	cfg.InsecureAcceptUnsigned = true
	warnings, err := cfg.Validate()
	require.NoError(t, err)
	require.Contains(t, strings.Join(warnings, "\n"), "INSECURE")
	sink := newMemSink()
	log := &logSink{}
	r, err := NewReceiver(cfg, ReceiverDeps{Sink: sink, Log: log})
	require.NoError(t, err)
	require.Equal(t, []string{EventConfigWarning}, log.names(), "the insecure mode is announced")
	comment := fixture(t, "issue_comment/created.payload.json")
	rec := serve(r, delivery{event: "issue_comment", id: "u1", body: comment, sig: "-"}.request(nil))
	require.Equal(t, 202, rec.Code)
	require.Len(t, sink.all(), 1)
}

func TestReceiverNeedsSink(t *testing.T) {
	_, err := NewReceiver(testConfig(), ReceiverDeps{})
	require.Error(t, err)
}

// TestServerRealHTTP runs the receiver behind the Server over a real
// socket: chunked uploads, keep-alive, shutdown.
func TestServerRealHTTP(t *testing.T) {
	comment := fixture(t, "issue_comment/created.payload.json")
	cfg := testConfig()
	sink := newMemSink()
	r, err := NewReceiver(cfg, ReceiverDeps{Sink: sink})
	require.NoError(t, err)
	srv := NewServer("127.0.0.1:0", r)
	require.NoError(t, srv.Start())
	defer srv.Close()
	require.Error(t, srv.Start(), "a second Start is refused")
	url := "http://" + srv.Addr() + "/gh-webhook"

	post := func(id string, body io.Reader) *http.Response {
		req, err := http.NewRequest(http.MethodPost, url, body)
		require.NoError(t, err)
		req.Header.Set("X-GitHub-Event", "issue_comment")
		req.Header.Set("X-GitHub-Delivery", id)
		req.Header.Set("X-Hub-Signature-256", Sign(cfg.Secret, comment))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	require.Equal(t, 202, post("real-1", bytes.NewReader(comment)).StatusCode)
	// An io.Reader of unknown length is sent chunked.
	resp := post("real-2", io.MultiReader(bytes.NewReader(comment[:100]), bytes.NewReader(comment[100:])))
	require.Equal(t, 202, resp.StatusCode)
	require.Len(t, sink.all(), 1, "the chunked redelivery of the same comment is one change")

	hz, err := http.Get("http://" + srv.Addr() + "/healthz")
	require.NoError(t, err)
	hz.Body.Close()
	require.Equal(t, 200, hz.StatusCode)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
	srv2 := NewServer("127.0.0.1:0", r)
	require.Equal(t, 5*time.Second, srv2.HTTPServer().ReadHeaderTimeout)
	require.NotZero(t, srv2.HTTPServer().WriteTimeout)
	require.NotZero(t, srv2.HTTPServer().IdleTimeout)
}

// TestReceiverConcurrentDeliveries sends the same and distinct deliveries
// from many clients at once over a real socket (run it with -race): every
// request is answered 202 and every distinct change is kept.
func TestReceiverConcurrentDeliveries(t *testing.T) {
	raw := fixture(t, "issue_comment/created.payload.json")
	cfg := testConfig()
	sink := newMemSink()
	r, err := NewReceiver(cfg, ReceiverDeps{Sink: sink})
	require.NoError(t, err)
	srv := NewServer("127.0.0.1:0", r)
	require.NoError(t, srv.Start())
	defer srv.Close()
	const distinct, copies = 20, 4
	bodies := make([][]byte, distinct)
	for i := range bodies {
		bodies[i] = mutate(t, raw, func(m map[string]any) { obj(m, "comment")["id"] = 1000 + i })
	}
	var wg sync.WaitGroup
	errs := make(chan error, distinct*copies)
	for i := range distinct {
		for c := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest(http.MethodPost, "http://"+srv.Addr()+"/gh-webhook", bytes.NewReader(bodies[i]))
				req.Header.Set("X-GitHub-Event", "issue_comment")
				// Half the copies redeliver the same id, half come from a
				// second hook with their own id.
				req.Header.Set("X-GitHub-Delivery", "d-"+strconv.Itoa(i)+"-"+strconv.Itoa(c%2))
				req.Header.Set("X-Hub-Signature-256", Sign(cfg.Secret, bodies[i]))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 202 {
					errs <- fmt.Errorf("status %d", resp.StatusCode)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// Copies racing each other may both reach the sink (the receiver marks
	// a change only once the sink kept it; the daemon's queue dedups them):
	// the point here is that nothing is lost.
	kept := map[string]int{}
	for _, ev := range sink.all() {
		kept[ev.Comments[0].ID]++
	}
	require.Len(t, kept, distinct)
	for id, n := range kept {
		require.LessOrEqual(t, n, 2, id)
	}
}

// TestAcceptedKeepsConnectionsAlive: a client that closes the 202 unread
// (as loadgen does) still reuses its connection.
func TestAcceptedKeepsConnectionsAlive(t *testing.T) {
	raw := fixture(t, "issue_comment/created.payload.json")
	cfg := testConfig()
	r, err := NewReceiver(cfg, ReceiverDeps{Sink: newMemSink()})
	require.NoError(t, err)
	srv := NewServer("127.0.0.1:0", r)
	require.NoError(t, srv.Start())
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	reused := 0
	for i := range 5 {
		body := mutate(t, raw, func(m map[string]any) { obj(m, "comment")["id"] = 500 + i })
		req, _ := http.NewRequest(http.MethodPost, "http://"+srv.Addr()+"/gh-webhook", bytes.NewReader(body))
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) {
				if info.Reused {
					reused++
				}
			},
		}))
		req.Header.Set("X-GitHub-Event", "issue_comment")
		req.Header.Set("X-GitHub-Delivery", "ka-"+strconv.Itoa(i))
		req.Header.Set("X-Hub-Signature-256", Sign(cfg.Secret, body))
		resp, err := client.Do(req)
		require.NoError(t, err)
		require.Equal(t, 202, resp.StatusCode)
		resp.Body.Close() // unread
	}
	require.Equal(t, 4, reused)
}

// TestReceiverReusesBuffersOnlyWhenTheSinkCopies: with SinkCopiesPayload a
// copying Sink sees every payload intact although request buffers are
// reused.
func TestReceiverReusesBuffersOnlyWhenTheSinkCopies(t *testing.T) {
	raw := fixture(t, "issue_comment/created.payload.json")
	cfg := testConfig()
	var mu sync.Mutex
	var copies [][]byte
	sink := SinkFunc(func(_ context.Context, ev *Event) error {
		mu.Lock()
		copies = append(copies, append([]byte(nil), ev.Payload...))
		mu.Unlock()
		return nil
	})
	r, err := NewReceiver(cfg, ReceiverDeps{Sink: sink, SinkCopiesPayload: true})
	require.NoError(t, err)
	var bodies [][]byte
	for i := range 20 {
		body := mutate(t, raw, func(m map[string]any) { obj(m, "comment")["id"] = 700 + i })
		bodies = append(bodies, body)
		d := delivery{event: "issue_comment", id: "r-" + strconv.Itoa(i), body: body, chunked: i%2 == 1}
		require.Equal(t, 202, serve(r, d.request(cfg.Secret)).Code)
	}
	require.Equal(t, bodies, copies)
}
