package githubsim

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Delivery is one webhook POST: made, failed, or dropped at Close.
type Delivery struct {
	// ID is X-GitHub-Delivery (a random UUID; the same for a Redeliver).
	ID     string
	HookID int64
	URL    string
	// Event is X-GitHub-Event ("issues", "issue_comment", "ping").
	Event  string
	Action string
	// Repo, Number and Sender summarise the payload (Number 0 for ping).
	Repo   string
	Number int
	Sender string
	// CommentID is the comment's id for issue_comment events.
	CommentID int64
	// Body is the exact payload sent (the bytes the signature covers).
	Body []byte
	// Header holds the request headers sent.
	Header http.Header
	// Redelivery is set for a Redeliver.
	Redelivery bool
	// Status is the receiver's status code (0 when none was obtained).
	Status int
	// Response is the receiver's answer body, clipped to 1 KiB.
	Response string
	// Err describes a failure to obtain an answer ("" on success or on
	// any HTTP answer).
	Err      string
	Sent     time.Time
	Duration time.Duration
	// Dropped is set for a delivery still queued when the server closed.
	Dropped bool
	// Attempt is the attempt's id in the hook's delivery list (GitHub's
	// delivery "id"; ID is its "guid"), set once it was sent.
	Attempt int64
}

// OK reports whether the receiver answered 2xx.
func (d Delivery) OK() bool { return d.Status/100 == 2 }

// Signature256 computes X-Hub-Signature-256 for body under secret, as
// GitHub does: "sha256=" + hex(HMAC-SHA256(secret, body)).
func Signature256(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func signature1(secret string, body []byte) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write(body)
	return "sha1=" + hex.EncodeToString(m.Sum(nil))
}

func constantTimeEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// newUUID returns a random RFC 4122 version 4 UUID, GitHub's delivery-id
// format.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// hookshotVersion is the User-Agent suffix GitHub sends (a short hex id).
const hookshotVersion = "GitHub-Hookshot/5f1c0a3"

// outbox delivers webhooks one at a time in the order they were queued.
type outbox struct {
	s *Server

	mu       sync.Mutex
	cond     *sync.Cond
	queue    []Delivery
	busy     bool
	done     []Delivery
	attempts int64 // attempts sent (Delivery.Attempt)
	stopped  bool
	started  bool
	finished chan struct{}
	cancel   context.CancelFunc
	ctx      context.Context
}

func newOutbox(s *Server) *outbox {
	o := &outbox{s: s, finished: make(chan struct{})}
	o.cond = sync.NewCond(&o.mu)
	o.ctx, o.cancel = context.WithCancel(context.Background())
	return o
}

func (o *outbox) start() {
	o.mu.Lock()
	o.started = true
	o.mu.Unlock()
	go o.loop()
}

func (o *outbox) loop() {
	defer close(o.finished)
	for {
		o.mu.Lock()
		for len(o.queue) == 0 && !o.stopped {
			o.cond.Wait()
		}
		if o.stopped {
			o.mu.Unlock()
			return
		}
		d := o.queue[0]
		o.queue = o.queue[1:]
		o.busy = true
		o.mu.Unlock()

		d = o.send(d)

		o.mu.Lock()
		o.busy = false
		o.attempts++
		d.Attempt = 90000000000 + o.attempts
		o.done = append(o.done, d)
		o.cond.Broadcast()
		o.mu.Unlock()
		if cb := o.s.cfg.OnDelivery; cb != nil {
			cb(d)
		}
	}
}

func (o *outbox) send(d Delivery) Delivery {
	d.Sent = time.Now()
	req, err := http.NewRequestWithContext(o.ctx, http.MethodPost, d.URL, bytes.NewReader(d.Body))
	if err != nil {
		d.Err = err.Error()
		return d
	}
	req.Header = d.Header.Clone()
	resp, err := o.s.cfg.HTTPClient.Do(req)
	d.Duration = time.Since(d.Sent)
	if err != nil {
		d.Err = err.Error()
		return d
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_ = resp.Body.Close()
	d.Status, d.Response = resp.StatusCode, string(b)
	return d
}

func (o *outbox) enqueue(ds ...Delivery) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		for _, d := range ds {
			d.Dropped = true
			o.done = append(o.done, d)
		}
		return
	}
	o.queue = append(o.queue, ds...)
	o.cond.Broadcast()
}

func (o *outbox) close() {
	o.mu.Lock()
	if o.stopped {
		o.mu.Unlock()
		return
	}
	o.stopped = true
	for _, d := range o.queue {
		d.Dropped = true
		o.done = append(o.done, d)
	}
	o.queue = nil
	started := o.started
	o.cond.Broadcast()
	o.mu.Unlock()
	o.cancel()
	if started {
		<-o.finished
	}
}

// waitIdle waits until nothing is queued or in flight.
func (o *outbox) waitIdle(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		o.mu.Lock()
		o.cond.Broadcast()
		o.mu.Unlock()
	})
	defer stop()
	o.mu.Lock()
	defer o.mu.Unlock()
	for (len(o.queue) > 0 || o.busy) && !o.stopped {
		if err := ctx.Err(); err != nil {
			return err
		}
		o.cond.Wait()
	}
	return nil
}

// delivery builds one signed delivery of payload to h.
func (s *Server) delivery(h Hook, event, action string, payload map[string]any, id string) (Delivery, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return Delivery{}, err
	}
	hd := http.Header{}
	hd.Set("Accept", "*/*")
	hd.Set("Content-Type", "application/json")
	hd.Set("User-Agent", hookshotVersion)
	hd.Set("X-GitHub-Delivery", id)
	hd.Set("X-GitHub-Event", event)
	hd.Set("X-GitHub-Hook-ID", fmt.Sprint(h.ID))
	hd.Set("X-GitHub-Hook-Installation-Target-Type", "repository")
	if rp, ok := payload["repository"].(map[string]any); ok {
		hd.Set("X-GitHub-Hook-Installation-Target-ID", fmt.Sprint(rp["id"]))
	}
	if h.Secret != "" {
		hd.Set("X-Hub-Signature", signature1(h.Secret, body))
		hd.Set("X-Hub-Signature-256", Signature256(h.Secret, body))
	}
	return Delivery{ID: id, HookID: h.ID, URL: h.URL, Event: event, Action: action, Body: body, Header: hd}, nil
}

// emit queues one delivery per hook for a change; s.mu must be held, so
// that deliveries are queued in the order the changes were made.
func (s *Server) emit(event, action string, rp *repo, is *issue, c *comment, sender string, extra map[string]any) {
	if len(s.hooks) == 0 {
		return
	}
	payload := map[string]any{"action": action, "repository": s.repoJSON(rp), "sender": s.userJSON(sender)}
	if is != nil {
		payload["issue"] = s.issueJSON(rp, is)
	}
	if c != nil {
		payload["comment"] = s.commentJSON(rp, c)
	}
	for k, v := range extra {
		payload[k] = v
	}
	var ds []Delivery
	for _, h := range s.hooks {
		d, err := s.delivery(h, event, action, payload, newUUID())
		if err != nil {
			continue
		}
		d.Repo, d.Sender = rp.full(), sender
		if is != nil {
			d.Number = is.number
		}
		if c != nil {
			d.CommentID = c.id
		}
		ds = append(ds, d)
	}
	s.outbound.enqueue(ds...)
}

// Deliveries returns every delivery attempted (or dropped) so far, in the
// order made.
func (s *Server) Deliveries() []Delivery {
	s.outbound.mu.Lock()
	defer s.outbound.mu.Unlock()
	return slices.Clone(s.outbound.done)
}

// WaitDeliveries waits until every queued webhook has been delivered (or
// failed). It returns ctx's error if ctx ends first.
func (s *Server) WaitDeliveries(ctx context.Context) error { return s.outbound.waitIdle(ctx) }

// Redeliver sends a past delivery again, byte for byte under the same
// delivery id and signature, like GitHub's "Redeliver" button.
func (s *Server) Redeliver(deliveryID string) error {
	for _, d := range s.Deliveries() {
		if d.ID == deliveryID && !d.Redelivery {
			r := Delivery{ID: d.ID, HookID: d.HookID, URL: d.URL, Event: d.Event, Action: d.Action, Repo: d.Repo,
				Number: d.Number, Sender: d.Sender, CommentID: d.CommentID, Body: d.Body, Header: d.Header.Clone(), Redelivery: true}
			s.outbound.enqueue(r)
			return nil
		}
	}
	return fmt.Errorf("%w: no delivery %q", ErrNotFound, clip(deliveryID, 60))
}

// Ping sends a ping event to every hook, as GitHub does when a hook is
// created.
func (s *Server) Ping(repoFull string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	owner, name, err := splitRepo(repoFull)
	if err != nil {
		return err
	}
	rp := s.lookupRepo(owner, name)
	if rp == nil {
		return fmt.Errorf("%w: repository %s", ErrNotFound, repoFull)
	}
	var ds []Delivery
	for _, h := range s.hooks {
		payload := map[string]any{
			"zen": "Keep it logically awesome.", "hook_id": h.ID,
			"hook": map[string]any{"type": "Repository", "id": h.ID, "name": "web", "active": true, "events": []string{"*"},
				"config": map[string]any{"content_type": "json", "url": h.URL, "insecure_ssl": "0"}},
			"repository": s.repoJSON(rp), "sender": s.userJSON(rp.owner),
		}
		d, err := s.delivery(h, "ping", "", payload, newUUID())
		if err != nil {
			return err
		}
		d.Repo, d.Sender = rp.full(), rp.owner
		ds = append(ds, d)
	}
	s.outbound.enqueue(ds...)
	return nil
}
