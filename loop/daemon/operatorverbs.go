package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/internal/panewatch"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// The operator's per-session verbs beyond stop, pause and resume (which
// service.go applies): start and cleanup, reply, transcript and the
// pane's screen. The control plane (apiserver.Operator), the dashboard
// and MCP reach them here.

// authorizedOperator returns the GitHub login behind identity when that
// login may act on item by the rules a ticket's keyword is held to:
// routing.authorizedUsers, then routing.authorized (teams, roles,
// CODEOWNERS), answered by GitHub (authorizingRule). A socket peer is
// "github:<login>" only when the operator's login is configured
// (--dashboard-operator); an OS user or the service token names no GitHub
// person and is refused. GitHub not answering refuses too (fail closed).
func (o *operatorDesk) authorizedOperator(ctx context.Context, identity, verb string, item workitem.Ref) (string, error) {
	login, ok := strings.CutPrefix(identity, "github:")
	if !ok || login == "" {
		return "", fmt.Errorf("%w: %s acts as a ticket keyword does and needs an authorized GitHub user; %q names none (run loopd with --dashboard-operator <your login>, one of routing.authorizedUsers or allowed by routing.authorized)", apiserver.ErrForbidden, verb, identity)
	}
	rule, err := authorizingRule(ctx, o.cfg.Routing.AuthorizedUsers, o.authority, login, item, nil)
	if err != nil {
		return "", fmt.Errorf("%w: %s may not %s %s now: %v (nothing was done; try again)", apiserver.ErrTryLater, login, verb, item, err)
	}
	if rule == "" {
		return "", fmt.Errorf("%w: %s is neither in routing.authorizedUsers nor allowed by routing.authorized for %s, so it may not %s (add the login, or a team:/permission:/codeowners rule that covers it)", apiserver.ErrForbidden, login, item, verb)
	}
	return login, nil
}

// errControlKeyword: a reply carried a control keyword.
var errControlKeyword = errors.New("control keyword in a reply")

func cliDeliveryID(verb string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "cli-" + verb + "-" + hex.EncodeToString(b[:])
}

// StartSession queues the ticket's start keyword as issued by actor: the
// queue delivers it to the intake like the keyword's comment (per-item
// order, the cluster's lease, the spawn policy, the control record), so
// the effect is the keyword's. The spawn policy is checked here first, so
// a start that would be refused is answered, not queued.
func (o *operatorDesk) StartSession(ctx context.Context, ref, actor string, noComment bool) (api.ControlResult, error) {
	return o.queueControl(ctx, ref, actor, ingress.CmdStart, noComment)
}

// CleanupSession queues the ticket's cleanup keyword as issued by actor.
func (o *operatorDesk) CleanupSession(ctx context.Context, ref, actor string, noComment bool) (api.ControlResult, error) {
	return o.queueControl(ctx, ref, actor, ingress.CmdCleanup, noComment)
}

func (o *operatorDesk) queueControl(ctx context.Context, ref, actor string, cmd ingress.Command, noComment bool) (api.ControlResult, error) {
	item, err := parseRef(ref)
	if err != nil {
		return api.ControlResult{}, err
	}
	verb := string(cmd)
	res := api.ControlResult{Ref: item.String(), Verb: verb, Effect: "refused"}
	login, err := o.authorizedOperator(ctx, actor, verb, item)
	if err != nil {
		return res, err
	}
	if !o.cfg.Routing.ControlEnabled {
		return res, fmt.Errorf("%w: routing.control.enabled is false, so loopd applies no %s keyword, from the ticket or from here", apiserver.ErrBadRequest, verb)
	}
	now := o.now()
	ev := &ingress.Event{
		Event: "loopctl", Action: verb, DeliveryID: cliDeliveryID(verb), Repo: item.Owner + "/" + item.Repo,
		WorkItems: []workitem.Ref{item}, Actor: login, Source: ingress.SourceCLI, ReceivedAt: now.UTC(),
		Control: &ingress.ControlCommand{Command: cmd, Actor: login, Note: "issued through loopd's control plane by " + actor},
	}
	if cmd == ingress.CmdStart {
		if _, live := o.intake.live(item); !live {
			if o.cfg.Routing.SpawnOnUnmatched == SpawnLabeled {
				ev.Labeled = o.carriesLabel(ctx, item)
			}
			if reason := o.intake.refusal(item, ev, cmd); reason != "" {
				return res, fmt.Errorf("%w: loopd would refuse this start (%s): routing.spawnOnUnmatched is %q%s", apiserver.ErrBadRequest, reason, o.cfg.Routing.SpawnOnUnmatched,
					map[bool]string{true: fmt.Sprintf(" and the item does not carry the label %q", o.cfg.Routing.AutoExecuteLabel)}[o.cfg.Routing.SpawnOnUnmatched == SpawnLabeled])
			}
		}
	}
	if err := o.sink.Put(ctx, ev); err != nil {
		return res, fmt.Errorf("queueing %s for %s: %w", verb, item, err)
	}
	res.Effect, res.Queued = "queued", ev.DeliveryID
	o.emit("control.queued", graph.LevelInfo, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "command", Value: verb},
		graph.Field{Key: "via", Value: "cli"}, graph.Field{Key: "actor", Value: actor}, graph.Field{Key: "delivery_id", Value: ev.DeliveryID})
	if !noComment {
		o.announceControl(ctx, item, verb, actor, &res)
	}
	return res, nil
}

// carriesLabel reports whether the ticket carries the auto-execute label
// (false when it cannot be read).
func (o *operatorDesk) carriesLabel(ctx context.Context, item workitem.Ref) bool {
	out, err := o.integ.Call(ctx, ops.GitHubGetLabels, map[string]any{"ref": item.String()})
	if err != nil {
		return false
	}
	switch ls := out["labels"].(type) {
	case []string:
		return slices.Contains(ls, o.cfg.Routing.AutoExecuteLabel)
	case []any:
		for _, l := range ls {
			if l == o.cfg.Routing.AutoExecuteLabel {
				return true
			}
		}
	}
	return false
}

// replyMark opens every reply in the pane, so the agent (and whoever reads
// the transcript) sees who spoke: the operator, through loopd, not the
// ticket.
func replyMark(login string) string {
	return "[message from the operator @" + login + " via loopd, not from the ticket]"
}

// controlKeywordIn returns the control keyword text carries ("" none),
// anywhere in it and in any case: a reply talks to the agent and must not
// read as a command to loopd if the agent copies it onto the ticket.
func (o *operatorDesk) controlKeywordIn(text string) string {
	flat := strings.ToLower(strings.Join(strings.Fields(text), " "))
	kws := o.cfg.Routing.Keywords
	if kws == nil {
		kws = map[string]string{}
		for _, c := range ingress.Commands() {
			kws[string(c)] = "the-loop " + string(c)
		}
	}
	for _, c := range ingress.Commands() {
		kw := strings.ToLower(strings.Join(strings.Fields(kws[string(c)]), " "))
		if kw != "" && strings.Contains(flat, kw) {
			return kws[string(c)]
		}
	}
	return ""
}

// Reply pastes an operator's message into the work item's live session,
// marked as the operator's. The event log records who, when and what
// before the paste (state first); a second line records the receipt. A
// reply moves no gate: gates read only events that came through ingress,
// and the reply never enters the queue.
func (o *operatorDesk) Reply(ctx context.Context, ref, actor, message string) (api.ReplyResult, error) {
	return o.reply(ctx, ref, actor, message)
}

func (o *operatorDesk) reply(ctx context.Context, ref, actor, message string) (api.ReplyResult, error) {
	return o.replyVia(ctx, ref, actor, message, replyMark, nil)
}

// replyVia is the one reply path (the control plane, the dashboard, MCP and
// the Slack channel): actor must be an authorized "github:<login>"; mark
// renders the line that opens the paste; audit adds fields to the event
// log's lines (who in Slack spoke).
func (o *operatorDesk) replyVia(ctx context.Context, ref, actor, message string, mark func(login string) string, audit []graph.Field) (api.ReplyResult, error) {
	item, err := parseRef(ref)
	if err != nil {
		return api.ReplyResult{}, err
	}
	res := api.ReplyResult{Ref: item.String(), Actor: actor}
	login, err := o.authorizedOperator(ctx, actor, "reply", item)
	if err != nil {
		return res, err
	}
	if kw := o.controlKeywordIn(message); kw != "" {
		return res, fmt.Errorf("%w: %w: the message carries the control keyword %q; a reply talks to the agent and never commands loopd — use `loopctl sessions %s` (or the ticket) for that, and reword the message", apiserver.ErrBadRequest, errControlKeyword, kw, strings.Fields(kw)[len(strings.Fields(kw))-1])
	}
	clean := sessions.SanitizePaste(message)
	if clean == "" {
		return res, fmt.Errorf("%w: the message is empty once control characters are removed", apiserver.ErrBadRequest)
	}
	rec, err := o.reg.Get(item)
	if err != nil {
		return res, err
	}
	if !rec.Status.Live() {
		return res, fmt.Errorf("%w: %s's session is %s; start it (`loopctl sessions start`) before replying", apiserver.ErrBadRequest, item, rec.Status)
	}
	if l, _ := o.tmux.Probe(ctx, rec.TmuxName); l != sessions.LivenessLive {
		return res, fmt.Errorf("%w: %s's harness is %s; a reply is not a respawn — start the session again first", apiserver.ErrBadRequest, item, l)
	}
	res.Pasted = mark(login) + "\n" + clean
	res.Session = rec.TmuxName
	res.At = o.now().UTC()
	who := append([]graph.Field{{Key: "work_item", Value: item.String()}, {Key: "actor", Value: actor}}, audit...)
	o.emit("session.operator_reply", graph.LevelInfo, append(who[:len(who):len(who)],
		graph.Field{Key: "message", Value: clean}, graph.Field{Key: "tmux_target", Value: rec.TmuxName})...)
	var dr sessions.DeliveryResult
	_, err = o.intake.pasteOnce(ctx, item, rec, replyKey(item, actor, res.At, clean), res.Pasted, func(text string) error {
		var err error
		res.Pasted = text
		dr, err = o.mgr.Deliver(ctx, item, text)
		return err
	})
	res.Verified = dr.Receipt.Verified()
	if err != nil {
		o.emit("session.operator_reply_failed", graph.LevelWarning, append(who[:len(who):len(who)], graph.Field{Key: "error", Value: err.Error()})...)
		return res, err
	}
	o.emit("session.operator_reply_delivered", graph.LevelInfo, append(who[:len(who):len(who)], graph.Field{Key: "verified", Value: res.Verified})...)
	return res, nil
}

// Transcript is the pane's scrollback and, where the harness keeps one,
// its own transcript's tail.
func (o *operatorDesk) Transcript(ctx context.Context, ref string) (api.Transcript, error) {
	item, rec, err := o.record(ref)
	if err != nil {
		return api.Transcript{}, err
	}
	t := api.Transcript{Ref: item.String(), Session: rec.TmuxName}
	if pane, err := o.tmux.Capture(ctx, rec.TmuxName); err != nil {
		t.PaneError = err.Error()
	} else {
		t.Pane = pane
	}
	// In a world of its own the harness writes under the world's copy of
	// the home.
	if path, tail, cut, err := sessions.HarnessTranscript(rec, o.tmux.HostPath(rec.TmuxName, o.claudeConfigDir)); err == nil {
		t.Harness = &api.HarnessTranscript{Path: path, Content: string(tail), Truncated: cut}
	}
	return t, nil
}

// Screen captures the work item's pane as it shows now, colours included.
func (o *operatorDesk) Screen(ctx context.Context, ref string) (string, error) {
	_, rec, err := o.record(ref)
	if err != nil {
		return "", err
	}
	out, err := o.tmux.CaptureScreen(ctx, rec.TmuxName)
	if errors.Is(err, sessions.ErrSessionMissing) {
		return "", fmt.Errorf("%w: %v", panewatch.ErrGone, err)
	}
	return out, err
}

var _ apiserver.Operator = (*operatorDesk)(nil)

// operatorDesk is the operator's verbs on work items and their sessions:
// the control plane's sessions API (apiserver.Sessions, Operator,
// SessionKeeper, PRLinker), and what MCP, the dashboard's panes and Slack
// reach. Each verb is authorized as a ticket's keyword would be (or by the
// transport), and recorded before its effect. It is built once the
// pipeline is (buildPipeline): every part it is handed exists.
type operatorDesk struct {
	// cfg is the configuration in force: Reload swaps its soft fields
	// under policy's write lock, so a verb reads them under policy.RLock.
	cfg       *Config
	policy    *sync.RWMutex
	reg       *sessions.Registry
	tmux      *sessions.Tmux
	mgr       *sessions.Manager
	ctl       *controlStore
	link      *graphLink
	intake    *intake
	integ     graph.Integrations
	authority *ingress.Authority
	cluster   *cluster
	// sink is the queue, observed (Daemon.Sink): where start and cleanup
	// are queued as a ticket's keyword is.
	sink ingress.Sink
	now  func() time.Time
	emit func(name string, level graph.Level, fields ...graph.Field)
	// claudeConfigDir is Claude Code's configuration directory (its
	// transcripts).
	claudeConfigDir string
}

func parseRef(ref string) (workitem.Ref, error) {
	item, err := workitem.Parse(ref)
	if err != nil {
		return item, fmt.Errorf("%w: %v", apiserver.ErrBadRequest, err)
	}
	return item, nil
}

func (o *operatorDesk) ListSessions(_ context.Context, status string) ([]sessions.Record, error) {
	recs, _ := o.reg.List()
	if status == "" {
		return recs, nil
	}
	var out []sessions.Record
	for _, r := range recs {
		if string(r.Status) == status {
			out = append(out, r)
		}
	}
	return out, nil
}

func (o *operatorDesk) Session(_ context.Context, ref string) (sessions.Record, error) {
	_, rec, err := o.record(ref)
	return rec, err
}

// record is ref's work item and its session record (a bad ref is the
// caller's to fix).
func (o *operatorDesk) record(ref string) (workitem.Ref, sessions.Record, error) {
	item, err := parseRef(ref)
	if err != nil {
		return item, sessions.Record{}, err
	}
	rec, err := o.reg.Get(item)
	return item, rec, err
}

func (o *operatorDesk) AttachCommand(_ context.Context, ref string) (string, error) {
	_, rec, err := o.record(ref)
	if err != nil {
		return "", err
	}
	return o.tmux.AttachCommand(rec.TmuxName), nil
}

// ControlSession applies an operator's stop, pause or resume (docs/daemon.md
// §5.4): recorded with source cli before the effect, like a comment-issued
// command but without the authorization check: the caller is an operator
// the transport authenticated (a socket peer of loopd's user outside any
// agent session, or the TCP token's holder), and actor is that identity
// (apiserver.Caller), never what the request body said.
func (o *operatorDesk) ControlSession(ctx context.Context, ref, verb, actor string, noComment bool) (api.ControlResult, error) {
	item, err := parseRef(ref)
	if err != nil {
		return api.ControlResult{}, err
	}
	o.policy.RLock()
	defer o.policy.RUnlock()
	rec, err := o.reg.Get(item)
	if err != nil {
		return api.ControlResult{}, err
	}
	live := rec.Status.Live()
	now := o.now()
	record := func(cmd ingress.Command) error { return o.ctl.Record(item, cmd, "cli", actor, "", now) }
	res := api.ControlResult{Ref: item.String(), Verb: verb, Effect: "noop"}
	switch verb {
	case "pause":
		if err := record(ingress.CmdPause); err != nil {
			return res, err
		}
		if live && rec.Status != sessions.StatusPaused {
			if err := o.intake.setStatus(ctx, item, sessions.StatusPaused); err != nil {
				return res, err
			}
			res.Effect = "paused"
		}
	case "resume":
		if !live || rec.Status != sessions.StatusPaused {
			res.Effect = "nothing-to-resume"
			break
		}
		if err := o.intake.setStatus(ctx, item, sessions.StatusActive); err != nil {
			return res, err
		}
		if err := record(ingress.CmdResume); err != nil {
			return res, err
		}
		res.Effect = "resumed"
	case "stop":
		if err := record(ingress.CmdStop); err != nil {
			return res, err
		}
		if live {
			o.link.onClose(ctx, item, rec.Cwd, rec.SessionID)
			if err := o.mgr.CloseWith(ctx, item, closeOptionsOf(o.cfg)); err != nil {
				return res, err
			}
			o.intake.endPRSessions(ctx, item, rec, nil, false)
			res.Effect = "stopped"
		}
	default:
		return res, fmt.Errorf("%w: verb %q: use stop, pause or resume", apiserver.ErrBadRequest, verb)
	}
	o.emit("control.command", graph.LevelInfo, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "command", Value: verb},
		graph.Field{Key: "via", Value: "cli"}, graph.Field{Key: "actor", Value: actor}, graph.Field{Key: "effect", Value: res.Effect})
	if !noComment {
		o.announceControl(ctx, item, verb, actor, &res)
	}
	return res, nil
}

// announceControl posts the marked comment that tells the work item's
// readers a control command was issued from the CLI (docs/daemon.md §5.4):
// its first line is the keyword, so the record reads the same as a
// comment-issued one; the marker keeps the daemon from acting on it again.
func (o *operatorDesk) announceControl(ctx context.Context, item workitem.Ref, verb, actor string, res *api.ControlResult) {
	kw := o.cfg.Routing.Keywords[verb]
	if kw == "" {
		kw = "the-loop " + verb
	}
	body := hooks.Mark(fmt.Sprintf("%s\n\n_Issued from the CLI by %s (effect: %s)._", kw, actor, res.Effect))
	out, err := o.integ.Call(ctx, ops.GitHubAddComment, map[string]any{"ref": item.String(), "body": body})
	if err != nil {
		res.AnnounceError = err.Error()
		o.emit("control.announce_failed", graph.LevelWarning, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "command", Value: verb}, graph.Field{Key: "error", Value: err.Error()})
		return
	}
	res.Announced, _ = out["url"].(string)
	if res.Announced == "" {
		res.Announced = item.URL()
	}
	o.emit("control.announced", graph.LevelInfo, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "command", Value: verb})
}

var _ apiserver.Sessions = (*operatorDesk)(nil)
