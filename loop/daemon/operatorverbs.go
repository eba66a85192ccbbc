package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/theloop-dev/theloop/graph"
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
func (d *Daemon) authorizedOperator(ctx context.Context, identity, verb string, item workitem.Ref) (string, error) {
	login, ok := strings.CutPrefix(identity, "github:")
	if !ok || login == "" {
		return "", fmt.Errorf("%w: %s acts as a ticket keyword does and needs an authorized GitHub user; %q names none (run loopd with --dashboard-operator <your login>, one of routing.authorizedUsers or allowed by routing.authorized)", apiserver.ErrForbidden, verb, identity)
	}
	rule, err := authorizingRule(ctx, d.cfg.Routing.AuthorizedUsers, d.authority, login, item, nil)
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
func (s serviceSessions) StartSession(ctx context.Context, ref, actor string, noComment bool) (api.ControlResult, error) {
	return s.d.queueControl(ctx, ref, actor, ingress.CmdStart, noComment)
}

// CleanupSession queues the ticket's cleanup keyword as issued by actor.
func (s serviceSessions) CleanupSession(ctx context.Context, ref, actor string, noComment bool) (api.ControlResult, error) {
	return s.d.queueControl(ctx, ref, actor, ingress.CmdCleanup, noComment)
}

func (d *Daemon) queueControl(ctx context.Context, ref, actor string, cmd ingress.Command, noComment bool) (api.ControlResult, error) {
	item, err := parseRef(ref)
	if err != nil {
		return api.ControlResult{}, err
	}
	verb := string(cmd)
	res := api.ControlResult{Ref: item.String(), Verb: verb, Effect: "refused"}
	login, err := d.authorizedOperator(ctx, actor, verb, item)
	if err != nil {
		return res, err
	}
	if !d.cfg.Routing.ControlEnabled {
		return res, fmt.Errorf("%w: routing.control.enabled is false, so loopd applies no %s keyword, from the ticket or from here", apiserver.ErrBadRequest, verb)
	}
	if d.q == nil {
		return res, errors.New("daemon: not running")
	}
	now := d.deps.Clock.Now()
	ev := &ingress.Event{
		Event: "loopctl", Action: verb, DeliveryID: cliDeliveryID(verb), Repo: item.Owner + "/" + item.Repo,
		WorkItems: []workitem.Ref{item}, Actor: login, Source: ingress.SourceCLI, ReceivedAt: now.UTC(),
		Control: &ingress.ControlCommand{Command: cmd, Actor: login, Note: "issued through loopd's control plane by " + actor},
	}
	if cmd == ingress.CmdStart {
		if _, live := d.intake.live(item); !live {
			if d.cfg.Routing.SpawnOnUnmatched == SpawnLabeled {
				ev.Labeled = d.carriesLabel(ctx, item)
			}
			if reason := d.intake.refusal(item, ev, cmd); reason != "" {
				return res, fmt.Errorf("%w: loopd would refuse this start (%s): routing.spawnOnUnmatched is %q%s", apiserver.ErrBadRequest, reason, d.cfg.Routing.SpawnOnUnmatched,
					map[bool]string{true: fmt.Sprintf(" and the item does not carry the label %q", d.cfg.Routing.AutoExecuteLabel)}[d.cfg.Routing.SpawnOnUnmatched == SpawnLabeled])
			}
		}
	}
	if err := d.Sink().Put(ctx, ev); err != nil {
		return res, fmt.Errorf("queueing %s for %s: %w", verb, item, err)
	}
	res.Effect, res.Queued = "queued", ev.DeliveryID
	d.emit("control.queued", graph.LevelInfo, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "command", Value: verb},
		graph.Field{Key: "via", Value: "cli"}, graph.Field{Key: "actor", Value: actor}, graph.Field{Key: "delivery_id", Value: ev.DeliveryID})
	if !noComment {
		d.announceControl(ctx, item, verb, actor, &res)
	}
	return res, nil
}

// carriesLabel reports whether the ticket carries the auto-execute label
// (false when it cannot be read).
func (d *Daemon) carriesLabel(ctx context.Context, item workitem.Ref) bool {
	out, err := d.integ.Call(ctx, ops.GitHubGetLabels, map[string]any{"ref": item.String()})
	if err != nil {
		return false
	}
	switch ls := out["labels"].(type) {
	case []string:
		return slices.Contains(ls, d.cfg.Routing.AutoExecuteLabel)
	case []any:
		for _, l := range ls {
			if l == d.cfg.Routing.AutoExecuteLabel {
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
func (d *Daemon) controlKeywordIn(text string) string {
	flat := strings.ToLower(strings.Join(strings.Fields(text), " "))
	kws := d.cfg.Routing.Keywords
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
func (s serviceSessions) Reply(ctx context.Context, ref, actor, message string) (api.ReplyResult, error) {
	return s.d.reply(ctx, ref, actor, message)
}

func (d *Daemon) reply(ctx context.Context, ref, actor, message string) (api.ReplyResult, error) {
	return d.replyVia(ctx, ref, actor, message, replyMark, nil)
}

// replyVia is the one reply path (the control plane, the dashboard, MCP and
// the Slack channel): actor must be an authorized "github:<login>"; mark
// renders the line that opens the paste; audit adds fields to the event
// log's lines (who in Slack spoke).
func (d *Daemon) replyVia(ctx context.Context, ref, actor, message string, mark func(login string) string, audit []graph.Field) (api.ReplyResult, error) {
	item, err := parseRef(ref)
	if err != nil {
		return api.ReplyResult{}, err
	}
	res := api.ReplyResult{Ref: item.String(), Actor: actor}
	login, err := d.authorizedOperator(ctx, actor, "reply", item)
	if err != nil {
		return res, err
	}
	if kw := d.controlKeywordIn(message); kw != "" {
		return res, fmt.Errorf("%w: %w: the message carries the control keyword %q; a reply talks to the agent and never commands loopd — use `loopctl sessions %s` (or the ticket) for that, and reword the message", apiserver.ErrBadRequest, errControlKeyword, kw, strings.Fields(kw)[len(strings.Fields(kw))-1])
	}
	clean := sessions.SanitizePaste(message)
	if clean == "" {
		return res, fmt.Errorf("%w: the message is empty once control characters are removed", apiserver.ErrBadRequest)
	}
	rec, err := d.reg.Get(item)
	if err != nil {
		return res, err
	}
	if !rec.Status.Live() {
		return res, fmt.Errorf("%w: %s's session is %s; start it (`loopctl sessions start`) before replying", apiserver.ErrBadRequest, item, rec.Status)
	}
	if l, _ := d.tmux.Probe(ctx, rec.TmuxName); l != sessions.LivenessLive {
		return res, fmt.Errorf("%w: %s's harness is %s; a reply is not a respawn — start the session again first", apiserver.ErrBadRequest, item, l)
	}
	res.Pasted = mark(login) + "\n" + clean
	res.Session = rec.TmuxName
	res.At = d.deps.Clock.Now().UTC()
	who := append([]graph.Field{{Key: "work_item", Value: item.String()}, {Key: "actor", Value: actor}}, audit...)
	d.emit("session.operator_reply", graph.LevelInfo, append(who[:len(who):len(who)],
		graph.Field{Key: "message", Value: clean}, graph.Field{Key: "tmux_target", Value: rec.TmuxName})...)
	var dr sessions.DeliveryResult
	_, err = d.pasteReply(ctx, item, rec, replyKey(item, actor, res.At, clean), res.Pasted, func(text string) error {
		var err error
		res.Pasted = text
		dr, err = d.mgr.Deliver(ctx, item, text)
		return err
	})
	res.Verified = dr.Receipt.Verified()
	if err != nil {
		d.emit("session.operator_reply_failed", graph.LevelWarning, append(who[:len(who):len(who)], graph.Field{Key: "error", Value: err.Error()})...)
		return res, err
	}
	d.emit("session.operator_reply_delivered", graph.LevelInfo, append(who[:len(who):len(who)], graph.Field{Key: "verified", Value: res.Verified})...)
	return res, nil
}

// Transcript is the pane's scrollback and, where the harness keeps one,
// its own transcript's tail.
func (s serviceSessions) Transcript(ctx context.Context, ref string) (api.Transcript, error) {
	d := s.d
	item, err := parseRef(ref)
	if err != nil {
		return api.Transcript{}, err
	}
	rec, err := d.reg.Get(item)
	if err != nil {
		return api.Transcript{}, err
	}
	t := api.Transcript{Ref: item.String(), Session: rec.TmuxName}
	if pane, err := d.tmux.Capture(ctx, rec.TmuxName); err != nil {
		t.PaneError = err.Error()
	} else {
		t.Pane = pane
	}
	// In a world of its own the harness writes under the world's copy of
	// the home.
	if path, tail, cut, err := sessions.HarnessTranscript(rec, d.tmux.HostPath(rec.TmuxName, d.claudeConfigDir())); err == nil {
		t.Harness = &api.HarnessTranscript{Path: path, Content: string(tail), Truncated: cut}
	}
	return t, nil
}

// claudeConfigDir is where Claude Code keeps its transcripts for the
// sessions loopd spawns.
func (d *Daemon) claudeConfigDir() string {
	if d.cfg.ClaudeEnv != nil {
		return d.cfg.ClaudeEnv.ConfigDir
	}
	home, _ := os.UserHomeDir()
	getenv := func(k string) string { v, _ := d.deps.Env(k); return v }
	return sessions.ClaudeEnvironmentFromEnv(getenv, home, d.cfg.Routing.WorkspaceRoot).ConfigDir
}

// Screen captures the work item's pane as it shows now, colours included.
func (s serviceSessions) Screen(ctx context.Context, ref string) (string, error) {
	return s.d.screen(ctx, ref)
}

func (d *Daemon) screen(ctx context.Context, ref string) (string, error) {
	item, err := parseRef(ref)
	if err != nil {
		return "", err
	}
	rec, err := d.reg.Get(item)
	if err != nil {
		return "", err
	}
	out, err := d.tmux.CaptureScreen(ctx, rec.TmuxName)
	if errors.Is(err, sessions.ErrSessionMissing) {
		return "", fmt.Errorf("%w: %v", panewatch.ErrGone, err)
	}
	return out, err
}

var _ apiserver.Operator = serviceSessions{}
