package daemon

import (
	"context"
	"strconv"
	"time"

	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
	"github.com/theloop-dev/theloop/loop/daemon/dashboard"
	"github.com/theloop-dev/theloop/loop/daemon/mcpserver"
	"github.com/theloop-dev/theloop/sessions"
)

// mcpOperator is the operator's MCP tools over the same verbs as the
// control plane's (service.go, operatorverbs.go). /mcp is served on the
// control socket behind its peer policy (and on TCP behind the token), so
// the caller is the operator; the actor recorded is the caller's identity
// when the transport's context reaches the tool, else the operator's
// configured identity.
type mcpOperator struct{ d *Daemon }

func (m mcpOperator) actor(ctx context.Context) string {
	if c, ok := apiserver.CallerOf(ctx); ok && c.Refused == nil && c.Identity != "" {
		return c.Identity
	}
	if m.d.cfg.Dashboard.Operator != "" {
		return "github:" + m.d.cfg.Dashboard.Operator
	}
	return "mcp-operator"
}

func (m mcpOperator) ListSessions(ctx context.Context, status string) ([]sessions.Record, error) {
	return m.d.desk.ListSessions(ctx, status)
}

func (m mcpOperator) Transcript(ctx context.Context, ref string) (api.Transcript, error) {
	return m.d.desk.Transcript(ctx, ref)
}

func (m mcpOperator) Attention(ctx context.Context) ([]api.AttentionItem, error) {
	return m.d.board().attention(ctx)
}

// attention is the "needs you" list the dashboard shows, for the control
// plane (GET /api/v1/attention) and MCP (list_attention): the dashboard's
// source when it runs, else one built for this call.
func (d boardReads) attention(ctx context.Context) ([]api.AttentionItem, error) {
	src, done := d.boardSource()
	defer done()
	return dashboard.NeedsYou(ctx, src, d.now())
}

// boardReads are the board's reads beside the dashboard: the API's and
// MCP's "needs you" list and work items, from the dashboard's source when
// it is served, else from one opened for the read.
type boardReads struct {
	host *dashHost
	open func() *dashSource
	now  func() time.Time
}

// boardSource is the dashboard's source when it runs, else one built for
// the caller (done closes it), so the API and the board never disagree.
func (d boardReads) boardSource() (src *dashSource, done func()) {
	if _, src = d.host.served(); src != nil {
		return src, func() {}
	}
	src = d.open()
	return src, src.close
}

func (m mcpOperator) Control(ctx context.Context, ref, verb string) (api.ControlResult, error) {
	return m.d.desk.ControlSession(ctx, ref, verb, m.actor(ctx), false)
}

func (m mcpOperator) Reply(ctx context.Context, ref, message string) (api.ReplyResult, error) {
	return m.d.desk.reply(ctx, ref, m.actor(ctx), message)
}

func (m mcpOperator) RegisterSession(ctx context.Context, ref string, req api.RegisterRequest) (api.SessionResult, error) {
	return m.d.desk.RegisterSession(ctx, ref, m.actor(ctx), req)
}

func (m mcpOperator) CloseSession(ctx context.Context, ref string, req api.CloseRequest) (api.SessionResult, error) {
	return m.d.desk.CloseSession(ctx, ref, m.actor(ctx), req)
}

var _ mcpserver.Operator = mcpOperator{}

func (m mcpOperator) WorkItems(ctx context.Context) ([]api.WorkItem, error) {
	return m.d.board().workItems(ctx)
}

func (m mcpOperator) LinkPR(ctx context.Context, ref, pullRequest string) (api.LinkPRResult, error) {
	return m.d.desk.LinkPR(ctx, ref, pullRequest)
}

func (m mcpOperator) Status(ctx context.Context) api.Status { return m.d.status(ctx) }

// workItems is the board's rows for the control plane (GET
// /api/v1/work-items) and MCP (list_work_items, get_work_item).
func (d boardReads) workItems(ctx context.Context) ([]api.WorkItem, error) {
	src, done := d.boardSource()
	defer done()
	items, err := src.Items(ctx)
	out := make([]api.WorkItem, 0, len(items))
	for _, it := range items {
		w := api.WorkItem{Ref: it.Ref, Repo: it.Repo, URL: it.URL, Title: it.Title, Loop: it.Loop, Node: it.Node, Phase: it.Phase,
			Human: it.Human, State: string(it.State), Finding: it.Finding, Since: it.Since, SessionLive: it.SessionLive,
			LastEvent: it.LastEvent, LastEventAt: it.LastEventAt, PendingTicketEffects: it.PendingTicketEffects, PullRequests: []string{}}
		for _, pr := range it.PullRequests {
			link := pr.URL
			if link == "" {
				link = "#" + strconv.Itoa(pr.Number)
			}
			w.PullRequests = append(w.PullRequests, link)
		}
		out = append(out, w)
	}
	return out, err
}
