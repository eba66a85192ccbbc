package ingress

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/workitem"
)

// The Jira webhook endpoint (docs/daemon.md §2.6). Jira Cloud's admin
// webhooks, registered with a secret, sign every request as WebSub does:
// X-Hub-Signature is "sha256=" and the hex HMAC-SHA256 of the raw body under
// the secret; X-Atlassian-Webhook-Identifier names the delivery, unique per
// site and kept across Jira's retries. The endpoint shares the GitHub
// receiver's port, its bound on unauthenticated body bytes (body.go, through
// the receiver it is given), its router's allowlist, control vocabulary and
// dedup cache, and its Sink: a Jira comment becomes the same Event a GitHub
// comment does, under the event name JiraCommentEvent, so everything after
// the queue treats both alike.
//
//	POST <Path>, no X-Atlassian-Webhook-Identifier   400 {"status":"missing delivery id"}
//	POST, body over MaxBodyBytes                     413
//	POST, X-Hub-Signature missing, malformed, wrong  401 {"status":"invalid signature"}
//	POST, not a JSON object Jira sends               400 {"status":"invalid payload"}
//	POST routed and kept, duplicate or dropped       202
//	POST, Sink down or full                          503 + Retry-After
//	other paths, other methods                       404 / 405

// DefaultJiraPath is webhooks.jiraWebhook.path's default.
const DefaultJiraPath = "/jira-webhook"

// JiraActorPrefix starts the actor and author of every Jira event: a Jira
// account is never taken for a GitHub login of the same spelling. Authorize
// a Jira user by listing jira:<accountId> (Cloud) or jira:<username>
// (Data Center) in routing.authorizedUsers.
const JiraActorPrefix = "jira:"

// JiraDeliveryPrefix starts the delivery id of a Jira webhook event in the
// queue ("jira-" + X-Atlassian-Webhook-Identifier); the poll's are
// "jira-poll-".
const JiraDeliveryPrefix = "jira-"

// JiraConfig configures the Jira endpoint.
type JiraConfig struct {
	// Path is the POST path (default DefaultJiraPath). It must differ from
	// the GitHub receiver's.
	Path string
	// Secret is the webhook's secret (from a file or the environment,
	// never the configuration file). Required: there is no unsigned Jira
	// endpoint.
	Secret []byte
	// Projects maps the served Jira projects to their repositories.
	Projects *workitem.JiraProjects
}

// JiraReceiver is the Jira webhook endpoint. Build it with
// NewJiraReceiver; it starts no goroutine.
type JiraReceiver struct {
	cfg JiraConfig
	// recv is the GitHub receiver in force (a reload replaces it): its
	// body budget, router, sink and log serve this endpoint too.
	recv func() *Receiver
	macs sync.Pool
}

// NewJiraReceiver builds the endpoint beside the receiver current returns
// (asked on every request, so a reloaded receiver's router and policy
// apply at once), whose body budget, router (allowlist, control keywords,
// dedup, repository bound) and Sink it uses.
func NewJiraReceiver(cfg JiraConfig, current func() *Receiver) (*JiraReceiver, error) {
	var recv *Receiver
	if current != nil {
		recv = current()
	}
	if recv == nil {
		return nil, errors.New("ingress: NewJiraReceiver needs the webhook Receiver it shares a port with")
	}
	if cfg.Path == "" {
		cfg.Path = DefaultJiraPath
	}
	switch {
	case len(cfg.Secret) == 0:
		return nil, fmt.Errorf("%w: the Jira webhook has no secret: set the webhook's secret in Jira (Settings → System → WebHooks) and give loopd the same one in a file (webhooks.jiraWebhook.secretFile) or an environment variable (webhooks.jiraWebhook.secretEnv)", ErrInvalidConfig)
	case !strings.HasPrefix(cfg.Path, "/"):
		return nil, fmt.Errorf("%w: webhooks.jiraWebhook.path %q must start with /", ErrInvalidConfig, cfg.Path)
	case strings.TrimRight(cfg.Path, "/") == strings.TrimRight(recv.cfg.Path, "/"):
		return nil, fmt.Errorf("%w: webhooks.jiraWebhook.path %q is the GitHub receiver's path too; give Jira its own (default %s)", ErrInvalidConfig, cfg.Path, DefaultJiraPath)
	case len(cfg.Projects.Projects()) == 0:
		return nil, fmt.Errorf("%w: webhooks.jiraWebhook.projects is empty: name each served Jira project's repository (PROJ: owner/repo)", ErrInvalidConfig)
	}
	secret := append([]byte(nil), cfg.Secret...)
	j := &JiraReceiver{cfg: cfg, recv: current}
	j.macs.New = func() any { return hmac.New(sha256.New, secret) }
	return j, nil
}

// Path is the endpoint's POST path.
func (j *JiraReceiver) Path() string { return j.cfg.Path }

// Handles reports whether a request is the endpoint's (its path).
func (j *JiraReceiver) Handles(r *http.Request) bool {
	return strings.TrimRight(r.URL.Path, "/") == strings.TrimRight(j.cfg.Path, "/")
}

// ServeHTTP implements http.Handler.
func (j *JiraReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r := j.recv()
	if req.Method != http.MethodPost {
		w.Header()["Allow"] = []string{"POST"}
		reply(w, http.StatusMethodNotAllowed, bodyBadMethod)
		return
	}
	if req.URL.RawQuery != "" || req.URL.ForceQuery || !j.Handles(req) {
		reply(w, http.StatusNotFound, bodyNotFound)
		return
	}
	r.stats.received.Add(1)
	h := req.Header
	id := headerValue(h, "X-Atlassian-Webhook-Identifier")
	delivery := JiraDeliveryPrefix + id
	if id == "" || !validDeliveryID(delivery) {
		r.reject(w, rejectDelivery, http.StatusBadRequest, bodyNoDelivery, "")
		return
	}
	if req.ContentLength > r.cfg.MaxBodyBytes {
		r.reject(w, rejectTooLarge, http.StatusRequestEntityTooLarge, bodyTooLarge, delivery)
		return
	}
	want, ok := parseSignature(headerValue(h, "X-Hub-Signature"))
	if !ok {
		w.Header()["Connection"] = connClose
		r.reject(w, rejectSignature, http.StatusUnauthorized, bodyBadSig, delivery)
		return
	}
	mac := j.macs.Get().(hash.Hash)
	mac.Reset()
	defer j.macs.Put(mac)
	cb := chunkedBody{addr: remoteHost(req.RemoteAddr)}
	if !r.readBody(w, req, &cb, mac, delivery) {
		return
	}
	var got [sha256.Size]byte
	mac.Sum(got[:0])
	if !hmac.Equal(got[:], want[:]) {
		r.release(&cb)
		r.reject(w, rejectSignature, http.StatusUnauthorized, bodyBadSig, delivery)
		return
	}
	body := cb.copyTo(nil)
	r.release(&cb)
	ev, drop, err := RouteJira(r.router, j.cfg.Projects, delivery, body)
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
	ev.Source = SourceWebhook
	r.keep(w, req, ev, ev.Event, delivery)
}

// JiraWebhook is the part of a Jira webhook body loopd reads.
type JiraWebhook struct {
	WebhookEvent string       `json:"webhookEvent"`
	Comment      *JiraComment `json:"comment"`
	Issue        *struct {
		Key string `json:"key"`
	} `json:"issue"`
}

// JiraComment is a comment as Jira's webhooks and REST API version 2 show
// it. Body is text (version 3's document bodies are not read).
type JiraComment struct {
	ID           json.RawMessage `json:"id"`
	Self         string          `json:"self"`
	Body         any             `json:"body"`
	Author       JiraUser        `json:"author"`
	UpdateAuthor JiraUser        `json:"updateAuthor"`
	Created      string          `json:"created"`
	Updated      string          `json:"updated"`
}

// JiraUser is a Jira account: accountId on Cloud, name on Data Center.
type JiraUser struct {
	Name      string `json:"name"`
	AccountID string `json:"accountId"`
}

// Identity is the user as theloop names them (JiraActorPrefix + name,
// else accountId); "" when neither is set or either is not a short
// printable token.
func (u JiraUser) Identity() string {
	id := u.Name
	if id == "" {
		id = u.AccountID
	}
	if id == "" || len(id) > 128 || !utf8.ValidString(id) {
		return ""
	}
	for _, c := range id {
		if c <= ' ' || c == 0x7f {
			return ""
		}
	}
	return JiraActorPrefix + id
}

// jiraActions maps the comment webhookEvents to an Event's Action.
var jiraActions = map[string]string{"comment_created": "created", "comment_updated": "updated", "comment_deleted": "deleted"}

// maxJiraCommentBody bounds a comment body carried in an event.
const maxJiraCommentBody = 1 << 20

// ParseJiraWebhook decodes an authenticated Jira webhook body. An error
// wraps ErrInvalidPayload.
func ParseJiraWebhook(body []byte) (JiraWebhook, error) {
	var p JiraWebhook
	if t := strings.TrimLeft(string(body[:min(len(body), 64)]), " \t\r\n"); !strings.HasPrefix(t, "{") {
		return p, fmt.Errorf("%w: a Jira webhook body is one JSON object", ErrInvalidPayload)
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return p, fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	return p, nil
}

// RouteJira classifies one authenticated Jira delivery, as Router.Route
// does a GitHub one: events other than comments are dropped
// (disabled-event), then delivery dedup, the issue's project (not served:
// repository-not-bound) and the repository bound, the self-authored drop,
// the sender (the comment's author for a creation, its updateAuthor for
// an edit: another person editing is sender-not-author), the allowlist;
// a created comment's control keyword is parsed; the content key is
// checked. The Event's Source is left for the caller to set.
func RouteJira(r *Router, projects *workitem.JiraProjects, delivery string, body []byte) (*Event, DropReason, error) {
	p, err := ParseJiraWebhook(body)
	if err != nil {
		return nil, "", err
	}
	action, ok := jiraActions[p.WebhookEvent]
	if !ok || p.Comment == nil || p.Issue == nil {
		return nil, r.drop(DropDisabledEvent, JiraCommentEvent, "", delivery, ""), nil
	}
	if r.dedup.Seen(delivery) {
		return nil, r.drop(DropDuplicate, JiraCommentEvent, action, delivery, ""), nil
	}
	ev, drop := jiraEvent(r, projects, delivery, action, p.Issue.Key, p.Comment, body)
	if drop != "" {
		return nil, drop, nil
	}
	return ev, "", nil
}

// jiraEvent builds the Event of one comment (webhook or poll), or drops it.
func jiraEvent(r *Router, projects *workitem.JiraProjects, delivery, action, key string, c *JiraComment, payload []byte) (*Event, DropReason) {
	item, err := projects.Ref(key)
	if err != nil {
		if _, kerr := workitem.ParseJiraKey(key); kerr != nil {
			return nil, r.drop(DropNoWorkItem, JiraCommentEvent, action, delivery, "")
		}
		return nil, r.drop(DropRepositoryUnbound, JiraCommentEvent, action, delivery, "")
	}
	if !r.bound.allows(item.Host, item.Owner, item.Repo) {
		return nil, r.drop(DropRepositoryUnbound, JiraCommentEvent, action, delivery, "")
	}
	author := c.Author.Identity()
	sender := author
	if action == "updated" {
		sender = c.UpdateAuthor.Identity()
	}
	text, _ := c.Body.(string)
	if len(text) > maxJiraCommentBody {
		text = clipText(text, maxJiraCommentBody)
	}
	id := jiraCommentID(c.ID)
	cm := Comment{ID: id, Author: author, Body: text, URL: c.Self, UpdatedAt: c.Updated, Item: item.String()}
	ev := &Event{
		Event: JiraCommentEvent, Action: action, DeliveryID: delivery, Repo: item.Owner + "/" + item.Repo,
		WorkItems: []workitem.Ref{item}, Actor: author, Comments: []Comment{cm}, Payload: payload,
		ReceivedAt: r.clock.Now().UTC(),
	}
	if SelfAuthored(text) || r.authz.isSelf(author) {
		return nil, r.drop(DropSelfAuthored, JiraCommentEvent, action, delivery, author)
	}
	if !r.authz.named(author) {
		return nil, r.drop(DropUnauthorized, JiraCommentEvent, action, delivery, author)
	}
	if sender != author {
		return nil, r.dropSender(JiraCommentEvent, action, delivery, author, sender)
	}
	if action == "created" {
		if cmd := r.keywords.parse(text); cmd != nil {
			cmd.Actor, cmd.Note = author, c.Self
			ev.Control = cmd
		}
	}
	if r.dedup.Seen(ev.ContentKey()) {
		return nil, r.drop(DropDuplicateContent, JiraCommentEvent, action, delivery, author)
	}
	if item.Host != "" {
		ev.Repo = item.Host + "/" + ev.Repo
	}
	if r.sink != nil {
		r.sink.Emit(graph.LogEvent{Time: r.clock.Now(), Name: EventRouted, Level: graph.LevelDebug, Fields: []graph.Field{
			{Key: "gh_event", Value: JiraCommentEvent}, {Key: "action", Value: action}, {Key: "delivery_id", Value: delivery},
			{Key: "work_items", Value: 1},
		}})
	}
	return ev, ""
}

// jiraCommentID is a comment's id (a string of digits in Jira's API, a
// number in some payloads); "" when it is neither.
func jiraCommentID(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return ""
		}
		s = n.String()
	}
	if s == "" || len(s) > 20 {
		return ""
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return ""
		}
	}
	return s
}

var _ http.Handler = (*JiraReceiver)(nil)
