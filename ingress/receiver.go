package ingress

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/theloop-dev/theloop/graph"
)

// Receiver is the GitHub webhook endpoint (docs/daemon.md §2.1 with
// docs/decisions.md §10): an http.Handler serving POST <Path> and GET
// /healthz. Per request, on the calling goroutine and nothing else: bound
// the body, verify X-Hub-Signature-256 in constant time on the raw bytes,
// route, hand the Event to the Sink, answer. What an unauthenticated
// sender can make it hold is bounded (body.go). It answers 202 only once the
// Sink has kept the event, and does no GitHub call, tmux or runtime work.
//
//	GET /health, /healthz (trailing / tolerated)  200 {"status":"ok"}
//	other GET                                     404 {"status":"not found"}
//	POST to another path, or with a query         404
//	POST without X-GitHub-Delivery (or malformed) 400 {"status":"missing delivery id"}
//	POST with a body over MaxBodyBytes            413 {"status":"payload too large"}
//	POST, signature missing or wrong              401 {"status":"invalid signature"}
//	POST, body not one JSON object                400 {"status":"invalid payload"}
//	  (form-encoded: its one payload field)
//	POST routed and kept, duplicate, or dropped   202, empty body (see accepted)
//	POST, Sink down, full or too slow             503 {"status":"unavailable"} + Retry-After
//	POST while unauthenticated bodies in flight
//	  hold Config.MaxUnverifiedBytes              503 {"status":"unavailable"} + Retry-After
//	other methods                                 405 + Allow: GET, POST
type Receiver struct {
	cfg    Config
	router *Router
	sink   Sink
	log    graph.Sink
	clock  graph.Clock
	macs   sync.Pool  // hash.Hash (HMAC-SHA256 keyed with the secret)
	bufs   sync.Pool  // *[]byte request bodies, when reuse
	chunks chunkPools // bodies being read (body.go)
	budget *bodyBudget
	reuse  bool
	retry  []string // Retry-After header value
	stats  receiverStats
	// rejectLogs rate-limit webhook.rejected lines, one per reject kind.
	rejectLogs [rejectKinds]rejectLog
	health     func(context.Context) error
}

// ReceiverDeps is the outside world of a Receiver. Sink is required.
type ReceiverDeps struct {
	// Sink keeps routed events (the daemon's durable queue).
	Sink Sink
	// Router routes deliveries (default: NewRouter(cfg, RouterDeps{Log,
	// Clock})). Pass one to share its Deduper with the poller.
	Router *Router
	// Log receives webhook.rejected and routing.* events (default: discarded).
	Log graph.Sink
	// Clock (default: Router's clock when Router is given, else
	// graph.SystemClock).
	Clock graph.Clock
	// SinkCopiesPayload promises that the Sink keeps nothing that aliases
	// ev.Payload once Put has returned (it publishes a copy, as a queue
	// client does). The receiver then reuses request buffers instead of
	// allocating one per delivery, which takes most of the garbage off the
	// webhook path. Leave it false for a Sink that holds *Event values.
	SinkCopiesPayload bool
	// Health, when set, is asked by GET /healthz: an error answers 503
	// {"status":"unavailable"} (a load balancer or monitor then sees a
	// loopd that cannot keep events, e.g. on a full disk). nil: always ok.
	Health func(context.Context) error
}

type receiverStats struct {
	received, accepted, kept, duplicates, unavailable atomic.Int64
	rejected                                          [rejectKinds]atomic.Int64
	dropped                                           sync.Map // DropReason → *atomic.Int64
}

// Reject kinds, for Stats.
const (
	rejectSignature = iota
	rejectPayload
	rejectDelivery
	rejectTooLarge
	rejectBusy
	rejectKinds
)

var rejectNames = [rejectKinds]string{"invalid-signature", "invalid-payload", "missing-delivery-id", "payload-too-large", "unverified-budget-spent"}

// EventConfigWarning reports, once per warning at construction, a
// configuration that runs but is probably wrong (Config.Validate).
const EventConfigWarning = "webhook.config_warning"

// NewReceiver validates cfg (see Config.Validate: no secret without
// InsecureAcceptUnsigned is refused) and returns the handler. It starts no
// goroutine.
func NewReceiver(cfg Config, deps ReceiverDeps) (*Receiver, error) {
	warnings, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	if deps.Clock == nil && deps.Router != nil {
		deps.Clock = deps.Router.Clock()
	}
	if deps.Clock == nil {
		deps.Clock = graph.SystemClock{}
	}
	if deps.Log != nil {
		for _, w := range warnings {
			deps.Log.Emit(graph.LogEvent{Time: deps.Clock.Now(), Name: EventConfigWarning, Level: graph.LevelWarning,
				Fields: []graph.Field{{Key: "warning", Value: w}}})
		}
	}
	if deps.Sink == nil {
		return nil, errors.New("ingress: NewReceiver needs a Sink (the daemon's durable queue)")
	}
	cfg = cfg.withDefaults()
	if deps.Clock == nil {
		deps.Clock = graph.SystemClock{}
	}
	router := deps.Router
	if router == nil {
		var err error
		if router, err = NewRouter(cfg, RouterDeps{Log: deps.Log, Clock: deps.Clock}); err != nil {
			return nil, err
		}
	}
	secret := append([]byte(nil), cfg.Secret...)
	r := &Receiver{cfg: cfg, router: router, sink: deps.Sink, log: deps.Log, clock: deps.Clock,
		retry: []string{strconv.Itoa(int((cfg.RetryAfter + time.Second - 1) / time.Second))}}
	r.macs.New = func() any { return hmac.New(sha256.New, secret) }
	r.reuse = deps.SinkCopiesPayload
	r.health = deps.Health
	r.bufs.New = func() any { b := make([]byte, 0, 32<<10); return &b }
	r.budget = newBodyBudget(cfg.MaxUnverifiedBytes, cfg.MaxBodyBytes)
	return r, nil
}

// Router returns the receiver's router.
func (r *Receiver) Router() *Router { return r.router }

// Stats are the receiver's counters since it was built.
type Stats struct {
	Received    int64
	Accepted    int64 // answered 202 (kept, duplicate or dropped)
	Kept        int64 // handed to the Sink and kept
	Duplicates  int64 // ErrDuplicate from the Sink, or a duplicate drop
	Unavailable int64 // answered 503
	Rejected    map[string]int64
	Dropped     map[DropReason]int64
}

// Stats returns a snapshot of the counters.
func (r *Receiver) Stats() Stats {
	s := Stats{
		Received: r.stats.received.Load(), Accepted: r.stats.accepted.Load(), Kept: r.stats.kept.Load(),
		Duplicates: r.stats.duplicates.Load(), Unavailable: r.stats.unavailable.Load(),
		Rejected: map[string]int64{}, Dropped: map[DropReason]int64{},
	}
	for i := range r.stats.rejected {
		s.Rejected[rejectNames[i]] = r.stats.rejected[i].Load()
	}
	r.stats.dropped.Range(func(k, v any) bool {
		s.Dropped[k.(DropReason)] = v.(*atomic.Int64).Load()
		return true
	})
	return s
}

// Pre-built response bodies and header values: no per-request formatting.
var (
	ctJSON          = []string{"application/json"}
	allowHeader     = []string{"GET, POST"}
	bodyOK          = []byte(`{"status":"ok"}` + "\n")
	bodyNotFound    = []byte(`{"status":"not found"}` + "\n")
	zeroLength      = []string{"0"}
	connClose       = []string{"close"}
	bodyBadSig      = []byte(`{"status":"invalid signature"}` + "\n")
	bodyBadPayload  = []byte(`{"status":"invalid payload"}` + "\n")
	bodyNoDelivery  = []byte(`{"status":"missing delivery id"}` + "\n")
	bodyTooLarge    = []byte(`{"status":"payload too large"}` + "\n")
	bodyUnavailable = []byte(`{"status":"unavailable"}` + "\n")
	bodyBadMethod   = []byte(`{"status":"method not allowed"}` + "\n")
)

func reply(w http.ResponseWriter, code int, body []byte) {
	h := w.Header()
	h["Content-Type"] = ctJSON
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// accepted answers 202 with an empty body. GitHub ignores the body; a
// client that closes a response body without reading it — Go's http.Client
// then drops the connection, and loadgen does exactly that — keeps its
// keep-alive connection only when there is nothing to read. Measured with
// loadgen (-c 8) on this machine: 2–4× the requests per second of a 202
// carrying {"status":"accepted"}, which is the reference's body.
func accepted(w http.ResponseWriter) {
	w.Header()["Content-Length"] = zeroLength
	w.WriteHeader(http.StatusAccepted)
}

// ServeHTTP implements http.Handler.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		p := strings.TrimRight(req.URL.Path, "/")
		if p == "/healthz" || p == "/health" {
			if r.health != nil {
				if err := r.health(req.Context()); err != nil {
					var hr HealthReason
					if errors.As(err, &hr) && validReason(hr.HealthReason()) {
						reply(w, http.StatusServiceUnavailable, []byte(`{"status":"unavailable","reason":"`+hr.HealthReason()+`"}`+"\n"))
						return
					}
					reply(w, http.StatusServiceUnavailable, bodyUnavailable)
					return
				}
			}
			reply(w, http.StatusOK, bodyOK)
			return
		}
		reply(w, http.StatusNotFound, bodyNotFound)
	case http.MethodPost:
		r.post(w, req)
	default:
		w.Header()["Allow"] = allowHeader
		reply(w, http.StatusMethodNotAllowed, bodyBadMethod)
	}
}

func (r *Receiver) post(w http.ResponseWriter, req *http.Request) {
	if req.URL.RawQuery != "" || req.URL.ForceQuery || (strings.TrimRight(req.URL.Path, "/") != strings.TrimRight(r.cfg.Path, "/")) {
		reply(w, http.StatusNotFound, bodyNotFound)
		return
	}
	r.stats.received.Add(1)
	h := req.Header
	delivery := headerValue(h, "X-Github-Delivery")
	if !validDeliveryID(delivery) {
		r.reject(w, rejectDelivery, http.StatusBadRequest, bodyNoDelivery, "")
		return
	}
	if req.ContentLength > r.cfg.MaxBodyBytes {
		r.reject(w, rejectTooLarge, http.StatusRequestEntityTooLarge, bodyTooLarge, delivery)
		return
	}
	// The signature header is checked for form before the body is read:
	// a request that cannot be signed right costs no body bytes.
	var want [sha256.Size]byte
	var mac hash.Hash
	if len(r.cfg.Secret) > 0 {
		var ok bool
		if want, ok = parseSignature(headerValue(h, "X-Hub-Signature-256")); !ok {
			w.Header()["Connection"] = connClose
			r.reject(w, rejectSignature, http.StatusUnauthorized, bodyBadSig, delivery)
			return
		}
		mac = r.macs.Get().(hash.Hash)
		mac.Reset()
		defer r.macs.Put(mac)
	}
	cb := chunkedBody{addr: remoteHost(req.RemoteAddr)}
	if !r.readBody(w, req, &cb, mac, delivery) {
		return
	}
	if mac != nil {
		var got [sha256.Size]byte
		mac.Sum(got[:0])
		if !hmac.Equal(got[:], want[:]) {
			r.release(&cb)
			r.reject(w, rejectSignature, http.StatusUnauthorized, bodyBadSig, delivery)
			return
		}
	}
	// Authenticated (or the operator accepts unsigned requests): only now
	// is the body one slice of its own size.
	var body []byte
	if r.reuse && cb.n <= maxPooledBody {
		pooled := r.bufs.Get().(*[]byte)
		defer func() { r.bufs.Put(pooled) }()
		body = cb.copyTo(*pooled)
		if cap(body) > cap(*pooled) {
			*pooled = body[:0] // keep the grown buffer
		}
	} else {
		body = cb.copyTo(nil)
	}
	r.release(&cb)
	if isFormEncoded(headerValue(h, "Content-Type")) {
		// GitHub's other content type: the signature covers the raw form
		// body (checked above); the JSON is its payload field.
		var ok bool
		if body, ok = formPayload(body); !ok {
			r.reject(w, rejectPayload, http.StatusBadRequest, bodyBadPayload, delivery)
			return
		}
	}
	if len(body) == 0 {
		body = []byte("{}") // docs/daemon.md §2.1: an empty body is the payload {}
	}
	name := headerValue(h, "X-Github-Event")
	if name == "" {
		name = "unknown"
	}
	ev, drop, err := r.router.Route(name, delivery, body)
	switch {
	case err != nil:
		r.reject(w, rejectPayload, http.StatusBadRequest, bodyBadPayload, delivery)
		return
	case drop != "":
		r.countDrop(drop)
		r.stats.accepted.Add(1)
		accepted(w)
		return
	}
	r.keep(w, req, ev, name, delivery)
}

// keep hands a routed event to the sink and answers: 202 once it is kept
// (or was already), 503 with Retry-After when it could not be. name is
// the event kind for the log line.
func (r *Receiver) keep(w http.ResponseWriter, req *http.Request, ev *Event, name, delivery string) {
	ctx, cancel := context.WithTimeout(req.Context(), r.cfg.SinkTimeout)
	err := r.sink.Put(ctx, ev)
	cancel()
	switch {
	case err == nil:
		r.stats.kept.Add(1)
	case errors.Is(err, ErrDuplicate):
		r.stats.duplicates.Add(1)
	default:
		// Down, full, timed out, or an error we do not know: not kept.
		r.stats.unavailable.Add(1)
		if r.log != nil {
			r.log.Emit(graph.LogEvent{Time: r.clock.Now(), Name: EventRejected, Level: graph.LevelWarning, Fields: []graph.Field{
				{Key: "reason", Value: "sink-unavailable"}, {Key: "gh_event", Value: name}, {Key: "delivery_id", Value: delivery},
				{Key: "error", Value: err.Error()},
			}})
		}
		w.Header()["Retry-After"] = r.retry
		reply(w, http.StatusServiceUnavailable, bodyUnavailable)
		return
	}
	r.router.Kept(ev)
	r.stats.accepted.Add(1)
	accepted(w)
}

// readBody reads req's body into cb within the unverified-body budget,
// feeding mac (nil: none); false when it answered the request instead (too
// large, out of budget, or the body did not arrive).
func (r *Receiver) readBody(w http.ResponseWriter, req *http.Request, cb *chunkedBody, mac hash.Hash, delivery string) bool {
	err := r.readChunked(cb, req.Body, req.ContentLength, r.cfg.MaxBodyBytes, mac)
	switch {
	case errors.Is(err, errTooLarge):
		w.Header()["Connection"] = connClose
		r.reject(w, rejectTooLarge, http.StatusRequestEntityTooLarge, bodyTooLarge, delivery)
		return false
	case errors.Is(err, errBusy):
		// Unauthenticated bodies in flight hold the whole budget, or this
		// sender its whole share: refuse at once rather than queue; GitHub
		// shows the 503, and the reconcile pass asks it to redeliver.
		r.stats.unavailable.Add(1)
		h := w.Header()
		h["Retry-After"] = r.retry
		h["Connection"] = connClose
		r.reject(w, rejectBusy, http.StatusServiceUnavailable, bodyUnavailable, delivery)
		return false
	case err != nil:
		// The client went away or timed out mid-body: nothing to answer.
		r.reject(w, rejectPayload, http.StatusBadRequest, bodyBadPayload, delivery)
		return false
	}
	return true
}

func (r *Receiver) countDrop(d DropReason) {
	if d == DropDuplicate || d == DropDuplicateContent {
		r.stats.duplicates.Add(1)
	}
	c, ok := r.stats.dropped.Load(d)
	if !ok {
		c, _ = r.stats.dropped.LoadOrStore(d, new(atomic.Int64))
	}
	c.(*atomic.Int64).Add(1)
}

// RejectLogEvery is how often, at most, one webhook.rejected line per
// reason is written. Anyone who reaches the port can send unsigned POSTs;
// a line each let 320,000 of them rotate the event log until it held
// nothing else.
const RejectLogEvery = 10 * time.Second

// rejectLog is the rate limit of webhook.rejected lines for one reason.
type rejectLog struct {
	mu    sync.Mutex
	next  time.Time // no line before this
	count int64     // rejections since the last line
}

// reject counts the rejection and answers. It writes a webhook.rejected
// line for the first rejection of a reason, then at most one per
// RejectLogEvery: the line's count is the rejections of that reason since
// the previous line, this one included (so a quiet tail is reported by the
// next line; Stats has every one at once), its delivery_id the latest.
func (r *Receiver) reject(w http.ResponseWriter, kind, code int, body []byte, delivery string) {
	r.stats.rejected[kind].Add(1)
	if r.log != nil {
		now := r.clock.Now()
		l := &r.rejectLogs[kind]
		l.mu.Lock()
		l.count++
		count, emit := l.count, !now.Before(l.next)
		if emit {
			l.count, l.next = 0, now.Add(RejectLogEvery)
		}
		l.mu.Unlock()
		if emit {
			r.log.Emit(graph.LogEvent{Time: now, Name: EventRejected, Level: graph.LevelWarning, Fields: []graph.Field{
				{Key: "reason", Value: rejectNames[kind]}, {Key: "count", Value: count},
				{Key: "delivery_id", Value: clipText(delivery, maxDeliveryID)},
			}})
		}
	}
	reply(w, code, body)
}

// isFormEncoded reports whether a Content-Type is
// application/x-www-form-urlencoded, parameters aside.
func isFormEncoded(ct string) bool {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.EqualFold(strings.TrimSpace(ct), "application/x-www-form-urlencoded")
}

// formPayload returns the payload field of a form-encoded webhook body.
// A body that does not decode, or has no payload field or more than one,
// is refused: which of two payloads would be the delivery is not a
// question to guess at.
func formPayload(body []byte) ([]byte, bool) {
	v, err := url.ParseQuery(string(body))
	if err != nil || len(v["payload"]) != 1 {
		return nil, false
	}
	return []byte(v["payload"][0]), true
}

// headerValue reads a canonical header key without net/http's
// canonicalisation work.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// validDeliveryID accepts what GitHub sends (a UUID) and any short
// printable token; the id becomes the queue's message id.
func validDeliveryID(s string) bool {
	if s == "" || len(s) > maxDeliveryID {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// verify checks X-Hub-Signature-256 ("sha256=" + 64 hex digits) against the
// HMAC of body, in constant time. Anything malformed fails.
func (r *Receiver) verify(header string, body []byte) bool {
	return verifySignature(&r.macs, header, body)
}

func verifySignature(pool *sync.Pool, header string, body []byte) bool {
	want, ok := parseSignature(header)
	if !ok {
		return false
	}
	var got [sha256.Size]byte
	m := pool.Get().(hash.Hash)
	m.Reset()
	m.Write(body)
	m.Sum(got[:0])
	pool.Put(m)
	return hmac.Equal(got[:], want[:])
}

// parseSignature decodes X-Hub-Signature-256: "sha256=" and 64 lower-case
// hex digits, as GitHub sends it (the reference compares the whole header
// string). Anything else is not a signature.
func parseSignature(header string) (want [sha256.Size]byte, ok bool) {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok || len(hexSig) != 2*sha256.Size {
		return want, false
	}
	for i := 0; i < len(hexSig); i += 2 {
		hi, lo := lowerHex(hexSig[i]), lowerHex(hexSig[i+1])
		if hi < 0 || lo < 0 {
			return want, false
		}
		want[i/2] = byte(hi<<4 | lo)
	}
	return want, true
}

// Sign returns the X-Hub-Signature-256 value for body under secret (for
// tests, tools and the CLI's synthetic deliveries).
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func lowerHex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

// HealthReason is an error from ReceiverDeps.Health that names why: GET
// /healthz then answers {"status":"unavailable","reason":...} with it (a
// short code such as disk-full; never the error's text, which is for the
// operator and not for whoever reaches the port).
type HealthReason interface {
	error
	HealthReason() string
}

// validReason accepts a short lower-case code.
func validReason(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c == '-') {
			return false
		}
	}
	return true
}

// maxPooledBody bounds the request buffers kept for reuse.
const maxPooledBody = 1 << 20

var errTooLarge = errors.New("body too large")

var _ http.Handler = (*Receiver)(nil)
