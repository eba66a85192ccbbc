package jirasim

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Webhooks as Jira Cloud's admin webhooks send them (registered in Jira
// administration or by /rest/webhooks/1.0/webhook, with a secret): a POST
// of the JSON event with
//
//	X-Hub-Signature: sha256=<hex HMAC-SHA256 of the raw body under the secret>
//	X-Atlassian-Webhook-Identifier: <id, unique per delivery, kept across retries>
//	X-Atlassian-Webhook-Flow: Primary
//
// The stand-in tries each delivery once: a receiver that is down misses
// it, which is what loopd's poll exists for.

// Hook is one registered webhook.
type Hook struct {
	URL string
	// Secret signs every delivery ("": unsigned, as a hook registered
	// without one).
	Secret string
}

// Delivery is one webhook attempt.
type Delivery struct {
	Identifier, Event, URL string
	// Status is the receiver's HTTP status (0: it could not be reached).
	Status int
}

type hooks struct {
	mu    sync.Mutex
	list  []Hook
	done  []Delivery
	wg    sync.WaitGroup
	count int
}

// AddHook registers a webhook for comment_created and comment_updated.
func (s *Server) AddHook(h Hook) {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	s.hooks.list = append(s.hooks.list, h)
}

// Deliveries returns the attempts so far.
func (s *Server) Deliveries() []Delivery {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	return slices.Clone(s.hooks.done)
}

// WaitDeliveries waits until every delivery started so far was attempted.
func (s *Server) WaitDeliveries(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.hooks.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Sign is the X-Hub-Signature value Jira sends for body under secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// CommentEvent is the body Jira Cloud sends for a comment event
// (webhookEvent comment_created or comment_updated) on issue key.
func CommentEvent(base, event, key string, c Comment, at time.Time) []byte {
	project, _, _ := strings.Cut(key, "-")
	b, _ := json.Marshal(map[string]any{
		"timestamp":    at.UnixMilli(),
		"webhookEvent": event,
		"comment":      commentJSON(base, key, c),
		"issue": map[string]any{"id": strings.TrimPrefix(key, project+"-"), "self": base + "/rest/api/2/issue/" + key, "key": key,
			"fields": map[string]any{"summary": "issue " + key, "project": map[string]any{"key": project}}},
	})
	return b
}

// deliver sends event to every hook in the background (s.mu held).
func (s *Server) deliver(event string, is *Issue, c Comment, _ string) {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	if len(s.hooks.list) == 0 {
		return
	}
	body := CommentEvent(s.srv.URL, event, is.Key, c, s.cfg.Now())
	for _, h := range s.hooks.list {
		s.hooks.count++
		var nonce [8]byte
		_, _ = rand.Read(nonce[:])
		id := fmt.Sprintf("%d-%s", s.hooks.count, hex.EncodeToString(nonce[:]))
		s.hooks.wg.Add(1)
		go func() {
			defer s.hooks.wg.Done()
			status := post(h, id, body)
			s.hooks.mu.Lock()
			s.hooks.done = append(s.hooks.done, Delivery{Identifier: id, Event: event, URL: h.URL, Status: status})
			s.hooks.mu.Unlock()
		}()
	}
}

func post(h Hook, id string, body []byte) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("X-Atlassian-Webhook-Identifier", id)
	req.Header.Set("X-Atlassian-Webhook-Flow", "Primary")
	if h.Secret != "" {
		req.Header.Set("X-Hub-Signature", Sign(h.Secret, body))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
