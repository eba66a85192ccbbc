package dashboard

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/ops"
)

// row is a board row as the template and the event stream see it.
type row struct {
	Ref     string `json:"ref"`
	Repo    string `json:"repo"`
	URL     string `json:"url"`
	Title   string `json:"title"`
	Loop    string `json:"loop"`
	Node    string `json:"node"`
	Phase   string `json:"phase"`
	Human   bool   `json:"human"`
	State   State  `json:"state"`
	Finding string `json:"finding"`
	Since   string `json:"since"`
	Age     string `json:"age"`
	// Finished is when a done or closed item finished (RFC 3339; then
	// Since is empty: no clock runs).
	Finished    string `json:"finished"`
	Live        bool   `json:"live"`
	Attach      string `json:"attach"`
	LastEvent   string `json:"lastEvent"`
	LastEventAt string `json:"lastEventAt"`
	Page        string `json:"page"`
	// Pending counts the ticket effects waiting in the session's outbox.
	Pending int `json:"pendingTicketEffects"`
	// CI is the pull requests' summary (prci.go); CIFail and CIFailURL
	// name the first failing check.
	CI        string `json:"ci"`
	CIFail    string `json:"ciFail"`
	CIFailURL string `json:"ciFailUrl"`
	// Cost is the item's usage figure (usage.go).
	Cost string `json:"cost"`
	// PRs are the pull requests as the item page's PR/CI section shows
	// them, so that it updates live from the same row event.
	PRs []prRow `json:"prs,omitempty"`

	wait time.Duration
}

// prRow is one pull request of a row event: what the item page's table
// shows (prView), in plain fields for the script.
type prRow struct {
	Number  int        `json:"number"`
	URL     string     `json:"url"`
	State   string     `json:"state"`
	Review  string     `json:"review"`
	Passing int        `json:"passing"`
	Failing int        `json:"failing"`
	Pending int        `json:"pending"`
	Failed  []checkRow `json:"failed,omitempty"`
	Waiting []string   `json:"waiting,omitempty"`
}

type checkRow struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

func rowData(it Item, now time.Time) row {
	r := row{
		Ref: it.Ref, Repo: it.Repo, URL: webURL(it.URL), Title: it.Title, Loop: it.Loop, Node: it.Node, Phase: it.Phase,
		Human: it.Human, State: it.State, Finding: clip(it.Finding, 400), Live: it.SessionLive, Attach: it.Attach,
		LastEvent: it.LastEvent, Page: "/item?ref=" + url.QueryEscape(it.Ref), Pending: it.PendingTicketEffects,
		Cost: it.Usage,
	}
	var prs []string
	for _, p := range it.PullRequests {
		prs = append(prs, p.Summary())
		if r.CIFail == "" && p.FailingName != "" {
			r.CIFail, r.CIFailURL = p.FailingName, webURL(p.FailingURL)
		}
	}
	r.CI = clip(strings.Join(prs, "; "), 300)
	if len(it.PullRequests) > 0 {
		for _, v := range prViews(it.PullRequests) {
			pr := prRow{Number: v.Number, URL: v.URL, State: v.State, Review: v.ReviewWords, Passing: v.Passing, Failing: v.Failing, Pending: v.Pending}
			for _, c := range v.Failed {
				pr.Failed = append(pr.Failed, checkRow{Name: c.Name, URL: c.URL})
			}
			for _, c := range v.Waiting {
				pr.Waiting = append(pr.Waiting, c.Name)
			}
			r.PRs = append(r.PRs, pr)
		}
	}
	if r.Phase == r.Node {
		r.Phase = "" // most nodes are named after their phase
	}
	switch {
	case it.State.Finished():
		// Over: no running clock, the time it finished instead.
		if at := it.Finished; !at.IsZero() {
			r.Finished = at.UTC().Format(time.RFC3339)
			r.Age = "finished " + at.UTC().Format("2006-01-02 15:04") + " UTC"
		} else {
			r.Age = "finished"
		}
	case !it.Since.IsZero():
		r.Since = it.Since.UTC().Format(time.RFC3339)
		r.wait = now.Sub(it.Since)
		r.Age = humanDuration(r.wait)
	}
	if !it.LastEventAt.IsZero() {
		r.LastEventAt = it.LastEventAt.UTC().Format(time.RFC3339)
	}
	return r
}

// webURL keeps only absolute http(s) URLs.
func webURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return ""
	}
	return u.String()
}

func humanDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", int(d/time.Millisecond))
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

type boardPage struct {
	Title      string
	Rows       []row
	Repos      []string
	States     []State
	Repo       string
	State      string
	Sort       string
	Total      int
	RenderedAt string
	// Empty is the row the live-update script clones for a new item.
	Empty row
	// Attention is "needs you" (attention.go); EmptyAttention the row the
	// script clones.
	Attention      attentionList
	EmptyAttention attentionRow
	// RowsHTML is Rows rendered (rowhtml.go).
	RowsHTML template.HTML
}

// board renders every tracked work item, filtered by repository and
// state, sorted by waiting time (longest first) or by item.
func (d *Dashboard) board(w http.ResponseWriter, r *http.Request, _ *session) {
	items, err := d.deps.Source.Items(r.Context())
	if err != nil {
		http.Error(w, "dashboard: reading the work items failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	d.hub.prime(items)
	p := d.boardData(items, r.URL.Query())
	p.RowsHTML = rowsHTML(p.Rows)
	p.Attention = attention(items, d.waits(r.Context()), d.deps.Now())
	if p.Attention.Count > 0 {
		p.Title = fmt.Sprintf("(%d) Board", p.Attention.Count)
	}
	d.render(w, "board.html", p)
}

func (d *Dashboard) boardData(items []Item, q url.Values) boardPage {
	now := d.deps.Now()
	p := boardPage{Title: "Board", States: States, Repo: q.Get("repo"), State: q.Get("state"), Sort: q.Get("sort"), Total: len(items), RenderedAt: now.UTC().Format(time.RFC3339)}
	p.Rows = make([]row, 0, len(items))
	repos := map[string]bool{}
	for _, it := range items {
		repos[it.Repo] = true
		if p.Repo != "" && it.Repo != p.Repo {
			continue
		}
		if p.State != "" && string(it.State) != p.State {
			continue
		}
		p.Rows = append(p.Rows, rowData(it, now))
	}
	for r := range repos {
		p.Repos = append(p.Repos, r)
	}
	sort.Strings(p.Repos)
	if p.Sort == "waiting" {
		sort.SliceStable(p.Rows, func(i, j int) bool { return p.Rows[i].wait > p.Rows[j].wait })
	} else {
		p.Sort = ""
		sort.SliceStable(p.Rows, func(i, j int) bool {
			if p.Rows[i].Repo != p.Rows[j].Repo {
				return p.Rows[i].Repo < p.Rows[j].Repo
			}
			return p.Rows[i].Ref < p.Rows[j].Ref
		})
	}
	return p
}

type decisionRow struct {
	Node, Outcome, By, At, Via, Comment, CommentURL string
	// Verdict is verified, refused or unverified ("" when not checked);
	// Reason explains a refusal; Key names the signing key.
	Verdict, Reason, Key string
}

type itemPage struct {
	Title     string
	Row       row
	Picture   *picture
	Messages  []string
	Artifacts []Artifact
	Decisions []decisionRow
	// Stays is the timeline grouped by node (timeline.go).
	Stays      []timelineGroup
	GateOpen   bool
	CanAct     bool
	Operator   string
	CSRF       string
	Posted     string
	Error      string
	ActionsWhy string
	// Pane is the live view of the agent's pane (pane.go).
	Pane paneView
	// PullRequests are the item's pull requests with review and checks.
	PullRequests []prView
	// Usage is what the item's sessions spent, per node (usage.go).
	Usage *UsageView
	// Card is what the open gate decides on (gatecard.go; nil: no gate,
	// or a Source without GateCards).
	Card *gateCardView
}

// prView is one pull request on the item page: state, review, the checks
// counted, and every failing (then pending) check by name with its link.
type prView struct {
	PullRequest
	ReviewWords string
	Failed      []Check
	Waiting     []Check
}

func prViews(prs []PullRequest) []prView {
	out := make([]prView, 0, len(prs))
	for _, p := range prs {
		v := prView{PullRequest: p, ReviewWords: strings.ReplaceAll(p.Review, "_", " ")}
		v.URL = webURL(p.URL)
		for _, c := range p.Checks {
			c.URL = webURL(c.URL)
			switch c.Verdict {
			case "failing":
				v.Failed = append(v.Failed, c)
			case "pending":
				v.Waiting = append(v.Waiting, c)
			}
		}
		out = append(out, v)
	}
	return out
}

// item renders one work item: graph picture, messages, artifacts,
// decisions, timeline and — at an open human gate — the gate actions.
func (d *Dashboard) item(w http.ResponseWriter, r *http.Request, ss *session) {
	ref := r.URL.Query().Get("ref")
	det, err := d.deps.Source.Detail(r.Context(), ref)
	if errors.Is(err, ErrNotFound) {
		w.WriteHeader(http.StatusNotFound)
		d.render(w, "denied.html", map[string]any{"Title": "Not found", "Why": "No tracked work item has that ref."})
		return
	}
	if err != nil {
		http.Error(w, "dashboard: reading the work item failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	p := d.itemData(r, det, ss)
	d.render(w, "item.html", p)
}

func (d *Dashboard) itemData(r *http.Request, det *Detail, ss *session) itemPage {
	now := d.deps.Now()
	p := itemPage{Title: det.Item.Ref, Row: rowData(det.Item, now), Messages: det.Messages, Artifacts: det.Artifacts,
		Operator: d.cfg.Operator, CSRF: ss.csrf, Posted: r.URL.Query().Get("posted"), Error: r.URL.Query().Get("error"),
		PullRequests: prViews(det.Item.PullRequests), Usage: d.itemUsage(r.Context(), det.Item.Ref)}
	switch p.Posted {
	case "approve", "approve-comments", "request-changes":
	default:
		p.Posted = ""
	}
	switch p.Error {
	case "not-at-gate", "post-failed", "empty-text", "changed":
	default:
		p.Error = ""
	}
	if det.Graph != nil {
		marks := marksFor(det.Graph, det.State)
		if det.Item.State == StateDone {
			// A finished walk has no current node: its terminal node passed.
			for id, m := range marks {
				if m == MarkCurrent {
					marks[id] = MarkPassed
				}
			}
		}
		pic := d.layouts.picture(r.Context(), det.Graph, marks)
		p.Picture = &pic
	}
	for _, v := range det.Decisions {
		dr := decisionRow{Node: v.Gate, Outcome: v.Outcome, By: v.By, At: v.At, Comment: v.Comment, CommentURL: webURL(v.CommentURL), Verdict: v.Verdict, Reason: v.Reason, Key: clip(v.Key, 24)}
		if dr.CommentURL == "" {
			dr.CommentURL = webURL(v.Comment)
		}
		if det.State != nil {
			if dec, ok := det.State.Decisions.Get(v.Gate); ok {
				dr.Via = dec.Via
			}
		}
		p.Decisions = append(p.Decisions, dr)
	}
	if st := det.State; st != nil && det.Decisions == nil {
		for _, k := range st.Decisions.Keys() {
			dec, _ := st.Decisions.Get(k)
			if dec.Outcome == "" && dec.By == "" {
				continue
			}
			dr := decisionRow{Node: k, Outcome: dec.Outcome, By: dec.By, At: dec.At, Via: dec.Via, Comment: dec.Comment, CommentURL: webURL(dec.CommentURL)}
			if dr.CommentURL == "" {
				dr.CommentURL = webURL(dec.Comment)
			}
			p.Decisions = append(p.Decisions, dr)
		}
	}
	if evs, err := d.deps.Source.Events(r.Context(), det.Item.Ref, time.Time{}, 200); err == nil {
		p.Stays = groupTimeline(evs, timelineInput{State: det.State, Graph: det.Graph, Now: now, Done: det.Item.State.Finished()})
	}
	p.Pane = d.paneData(r.Context(), det.Item.Ref, r.URL.Query())
	p.GateOpen = det.Item.Human && det.Item.State == StateWaiting
	if p.GateOpen {
		if c := d.gateCard(r.Context(), det.Item.Ref); c != nil {
			p.Card = cardView(c, det.Item.PullRequests)
		}
	}
	why := d.operatorMay(r.Context(), det.Item.Ref)
	p.CanAct = d.deps.Poster != nil && why == ""
	switch {
	case d.cfg.Operator != "" && why != "":
		p.ActionsWhy = fmt.Sprintf("You are signed in as %s, whom theloop would not let decide here (%s): it would ignore your comment, so the dashboard offers no actions.", d.cfg.Operator, why)
	case !p.CanAct:
		p.ActionsWhy = "No operator identity is configured for the dashboard (loopd run --dashboard-operator), so it offers no actions: decide on the ticket itself."
	}
	return p
}

// Gate actions and the comment each posts. The wording is what
// classify-feedback reads: "Approved." approves; "minor comments" makes an
// approval approved-with-comments; "Changes requested" requests changes.
const (
	actApprove         = "approve"
	actApproveComments = "approve-comments"
	actRequestChanges  = "request-changes"
	maxCommentText     = 16 << 10
	dashboardFooter    = "\n\n<sub>Sent from the theloop dashboard.</sub>"
)

// actionOutcome is the outcome each gate action asks for, as the
// confirmation names it.
var actionOutcome = map[string]string{actApprove: "approved", actApproveComments: "approved with comments", actRequestChanges: "changes requested"}

// gateConfirmPage is the confirmation of a gate action: the comment as it
// will be posted, and as whom.
type gateConfirmPage struct {
	Title, Ref, URL, Operator, Gate, Outcome, Body, Action, Text, Digest, CSRF, Back string
}

// gateCard asks the Source for the open gate's card (nil when it has
// none, or cannot say).
func (d *Dashboard) gateCard(ctx context.Context, ref string) *GateCard {
	gc, ok := d.deps.Source.(GateCards)
	if !ok {
		return nil
	}
	c, err := gc.GateCard(ctx, ref)
	if err != nil {
		fmt.Fprintf(d.deps.Log, "dashboard: reading the gate card of %s: %v\n", ref, err)
		return nil
	}
	return c
}

// commentBody composes the gate comment for action and the operator's
// text ("" with false when the action needs text and has none).
func commentBody(action, text string) (string, bool) {
	text = strings.TrimSpace(strings.ReplaceAll(text, hooks.Marker, ""))
	switch action {
	case actApprove:
		if text != "" {
			return "Approved.\n\n" + text + dashboardFooter, true
		}
		return "Approved." + dashboardFooter, true
	case actApproveComments:
		if text == "" {
			return "", false
		}
		return "Approved, with minor comments:\n\n" + text + dashboardFooter, true
	case actRequestChanges:
		if text == "" {
			return "", false
		}
		return "Changes requested:\n\n" + text + dashboardFooter, true
	}
	return "", false
}

// postedForm reads a POSTed form of at most limit bytes and checks its
// CSRF token against the session's; on failure it answers (400, 403) and
// reports false. Every state-changing form goes through it (the same-origin
// check is guard's).
func postedForm(w http.ResponseWriter, r *http.Request, ss *session, limit int64) bool {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "dashboard: unreadable form", http.StatusBadRequest)
		return false
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(ss.csrf)) != 1 {
		http.Error(w, "dashboard: missing or wrong CSRF token; reload the page", http.StatusForbidden)
		return false
	}
	return true
}

// gate posts the operator's verdict as an ordinary comment on the ticket.
// Nothing moves here: the gate moves when the comment comes back through
// the webhook, ingress and the authorization check, like any other.
func (d *Dashboard) gate(w http.ResponseWriter, r *http.Request, ss *session) {
	if !postedForm(w, r, ss, maxCommentText+4096) {
		return
	}
	ref := r.PostForm.Get("ref")
	if why := d.operatorMay(r.Context(), ref); d.deps.Poster == nil || why != "" {
		http.Error(w, "dashboard: the operator may not decide this gate (no operator identity, or not allowed by routing.authorizedUsers/routing.authorized)", http.StatusForbidden)
		return
	}
	back := "/item?ref=" + url.QueryEscape(ref)
	det, err := d.deps.Source.Detail(r.Context(), ref)
	if err != nil {
		http.Error(w, "dashboard: no such work item", http.StatusNotFound)
		return
	}
	if !det.Item.Human || det.Item.State != StateWaiting {
		http.Redirect(w, r, back+"&error=not-at-gate", http.StatusSeeOther)
		return
	}
	action := r.PostForm.Get("action")
	if len(r.PostForm.Get("text")) > maxCommentText {
		http.Error(w, "dashboard: the comment is too long", http.StatusRequestEntityTooLarge)
		return
	}
	body, ok := commentBody(action, r.PostForm.Get("text"))
	if !ok {
		http.Redirect(w, r, back+"&error=empty-text", http.StatusSeeOther)
		return
	}
	// What the operator looked at: the gate and its artifacts' hashes. A
	// gate that moved on, or an artifact the agent changed since, posts
	// nothing (the page is shown again).
	digest := ""
	if c := d.gateCard(r.Context(), det.Item.Ref); c != nil {
		digest = GateDigest(c.Gate, c.Artifacts)
	}
	if r.PostForm.Get("node") != det.Item.Node || r.PostForm.Get("digest") != digest {
		http.Redirect(w, r, back+"&error=changed", http.StatusSeeOther)
		return
	}
	if r.PostForm.Get("confirm") != "yes" {
		d.render(w, "gateconfirm.html", gateConfirmPage{Title: "Confirm · " + det.Item.Ref, Ref: det.Item.Ref, URL: webURL(det.Item.URL),
			Operator: d.cfg.Operator, Gate: det.Item.Node, Outcome: actionOutcome[action], Body: body, Action: action,
			Text: r.PostForm.Get("text"), Digest: digest, CSRF: ss.csrf, Back: back})
		return
	}
	if _, err := d.deps.Poster.Call(r.Context(), ops.GitHubAddComment, map[string]any{"ref": det.Item.Ref, "body": body}); err != nil {
		fmt.Fprintf(d.deps.Log, "dashboard: posting %s's %s on %s: %v\n", d.cfg.Operator, action, det.Item.Ref, err)
		http.Redirect(w, r, back+"&error=post-failed", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, back+"&posted="+url.QueryEscape(action), http.StatusSeeOther)
}
