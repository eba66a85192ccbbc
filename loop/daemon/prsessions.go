package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// Pull-request endpoints (docs/daemon.md §6.7). A work item's record lists the
// pull requests linked to it (sessions.Record.PullRequests): a link is
// written when a PR's event is delivered to the record or spawns it
// (session.pr_linked). A linked PR gets a session of its own — a record
// whose Item is the PR and whose Parent is the work item, in its own tmux
// session and its own checkout — when the work item's sessionPerPr mode
// splits it off (always; cross-repository for a PR in another repository)
// and it can get its OWN checkout: a workspace is configured, the PR's head
// branch is known and checks out, and the checkout is not the work item's.
// Otherwise the event goes into the work item's session
// (session.pr_session_declined {reason}). A PR session is announced on the
// PR (session.pr_spawned); if spawning it fails, the event is pasted into
// the work item's session instead. A linked PR closing ends its own session
// (kept or killed per the close settings) and leaves the work item's
// session open (session.pr_closed, session.kept_open).

// prEvent is what an event says about the pull request it concerns.
type prEvent struct {
	PR workitem.Ref
	// Branch is the head branch ("" when the payload does not say).
	Branch string
	Merged bool
	// Fork: the head branch lives in another repository (a fork); the
	// PR's code is refs/pull/<n>/head of its own repository.
	Fork bool
}

// prOf is the pull request the event concerns, with its head branch when
// the payload carries it: pull_request* events' pull_request, or an issue
// (comment) event's issue that is a PR.
func prOf(ev *ingress.Event) (prEvent, bool) {
	var out prEvent
	if len(ev.Payload) == 0 || ev.Repo == "" {
		return out, false
	}
	var p struct {
		Repository struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
		PullRequest *struct {
			Number int  `json:"number"`
			Merged bool `json:"merged"`
			Head   struct {
				Ref  string `json:"ref"`
				Repo *struct {
					FullName string `json:"full_name"`
				} `json:"repo"`
			} `json:"head"`
		} `json:"pull_request"`
		Issue *struct {
			Number      int             `json:"number"`
			PullRequest json.RawMessage `json:"pull_request"`
		} `json:"issue"`
	}
	if json.Unmarshal(ev.Payload, &p) != nil {
		return out, false
	}
	n := 0
	switch {
	case ingress.KindOf(ev.Event).OnPR && p.PullRequest != nil:
		n, out.Branch, out.Merged = p.PullRequest.Number, p.PullRequest.Head.Ref, p.PullRequest.Merged
		if h := p.PullRequest.Head.Repo; h != nil && h.FullName != "" && p.Repository.FullName != "" && !strings.EqualFold(h.FullName, p.Repository.FullName) {
			out.Fork = true
		}
	case p.Issue != nil && len(p.Issue.PullRequest) > 0 && string(p.Issue.PullRequest) != "null":
		n = p.Issue.Number
	default:
		return out, false
	}
	if n <= 0 {
		return out, false
	}
	item, err := workitem.Parse(fmt.Sprintf("github:%s#%d", ev.Repo, n))
	if err != nil {
		return out, false
	}
	out.PR = item
	if sessions.ValidateBranch(out.Branch) != nil {
		out.Branch = ""
	}
	return out, true
}

func sameRepo(a, b workitem.Ref) bool {
	return strings.EqualFold(a.HostOrDefault(), b.HostOrDefault()) && strings.EqualFold(a.Owner, b.Owner) && strings.EqualFold(a.Repo, b.Repo)
}

// linkPR records that pr serves item (session.pr_linked the first time) and
// remembers its head branch. It returns the record as written (or as read,
// when nothing changed).
func (in *intake) linkPR(ctx context.Context, item workitem.Ref, rec sessions.Record, pe prEvent, ev *ingress.Event) sessions.Record {
	pr, branch := pe.PR, pe.Branch
	if l, ok := rec.PR(pr); ok && (branch == "" || l.Branch == branch && l.Fork == pe.Fork) {
		in.notePR(pr, item)
		return rec
	}
	added := false
	updated, err := in.reg.Update(ctx, item, func(r *sessions.Record, exists bool) error {
		if !exists {
			return sessions.ErrNoRecord
		}
		l, ok := r.PR(pr)
		if !ok {
			l = sessions.PRLink{PR: pr, Linked: in.now().UTC().Truncate(time.Second)}
		}
		if branch != "" {
			l.Branch, l.Fork = branch, pe.Fork
		}
		added = r.SetPR(l)
		return nil
	})
	if err != nil {
		in.emit("session.link_failed", graph.LevelWarning, item, ev, graph.Field{Key: "pull_request", Value: pr.String()}, graph.Field{Key: "error", Value: err.Error()})
		return rec
	}
	in.notePR(pr, item)
	if added {
		in.emit("session.pr_linked", graph.LevelInfo, item, ev, graph.Field{Key: "pull_request", Value: pr.String()})
	}
	return updated
}

// sessionPerPr is the work item's effective mode: the value its
// phase-selection froze — loopd's copy under the state root, else graph
// state's — else routing.tmux.sessionPerPr.
func (in *intake) sessionPerPr(ctx context.Context, item workitem.Ref, cwd string) string {
	mode := in.conf().SessionPerPr
	if m := in.ctl.frozenSessionPerPr(item); m != "" && in.conf().GraphEnabled {
		// loopd's own copy of the selection wins over the checkout's.
		mode = m
	} else if id := item.SpecID(); id != "" && in.conf().GraphEnabled {
		if st, err := loop.NewStore(cwd, in.link.specDir(cwd)).Load(ctx, id); err == nil && st != nil {
			for _, k := range st.Decisions.Keys() {
				d, _ := st.Decisions.Get(k)
				switch d.SessionPerPr {
				case loop.SessionPerPrNever, loop.SessionPerPrCrossRepository, loop.SessionPerPrAlways:
					mode = d.SessionPerPr
				}
			}
		}
	}
	switch mode {
	case loop.SessionPerPrNever, loop.SessionPerPrAlways:
		return mode
	}
	return loop.SessionPerPrCrossRepository
}

// splitsOff reports whether the work item's sessionPerPr mode gives pr a
// session of its own (always; cross-repository for a PR in another
// repository) and the link still allows one.
func (in *intake) splitsOff(ctx context.Context, item workitem.Ref, rec sessions.Record, pr workitem.Ref) bool {
	if l, ok := rec.PR(pr); ok && l.Closed {
		return false
	}
	switch in.sessionPerPr(ctx, item, rec.Cwd) {
	case loop.SessionPerPrAlways:
		return true
	case loop.SessionPerPrCrossRepository:
		return !sameRepo(pr, item)
	}
	return false
}

// toPREndpoint delivers a linked PR's event into the PR's own session,
// spawning it when the work item's mode splits PRs off and the PR can have
// its own checkout. handled is false when the event belongs in the work
// item's own session (not split, declined, closed, or the PR's spawn
// failed).
func (in *intake) toPREndpoint(ctx context.Context, item workitem.Ref, rec sessions.Record, pr workitem.Ref, ev *ingress.Event, gc *graphContext) (handled bool, err error) {
	link, _ := rec.PR(pr)
	if link.Closed {
		return false, nil
	}
	if ep, err := in.reg.Get(pr); err == nil && ep.Status.Live() {
		if ep.Parent != item {
			return false, nil // the PR is somebody else's session (its own work item)
		}
		if in.done(ctx, ev, stepPRSpawn) {
			// A redelivery of the event that spawned it (a crash came
			// between): its text is in the spawn prompt; finish the rest.
			if err := in.mark(ctx, ev, stepPaste); err != nil {
				return true, err
			}
			in.link.onPRSpawn(ctx, item, pr, rec.Cwd, ep.SessionID)
			in.announcePR(ctx, item, ep, ev)
			return true, nil
		}
		return true, in.deliverEndpoint(ctx, item, rec, ep, ev, gc)
	}
	if link.Declined != "" {
		return false, nil
	}
	return in.spawnEndpoint(ctx, item, rec, link, ev, gc)
}

func claimFor(item, pr workitem.Ref) (int, string) {
	if sameRepo(item, pr) {
		return pr.Number, ""
	}
	return pr.Number, pr.Owner + "/" + pr.Repo
}

// deliverEndpoint pastes the event prompt into the PR's own session
// (respawning it if it died).
func (in *intake) deliverEndpoint(ctx context.Context, item workitem.Ref, rec, ep sessions.Record, ev *ingress.Event, gc *graphContext) error {
	pr := ep.Item
	n, repo := claimFor(item, pr)
	prompt := renderPrompt(in.conf().PromptTemplate, false, promptInput{WorkItem: pr.String(), Event: ev, Interaction: in.conf().InteractionMode, Graph: gc, ClaimPR: n, ClaimPRRepo: repo})
	var res sessions.DeliveryResult
	pasted, err := in.pasteOnce(ctx, pr, ep, ev.DeliveryID+stepPaste, prompt, func(text string) error {
		var err error
		prompt = text
		res, err = in.mgr.Deliver(ctx, pr, text)
		return err
	})
	if err != nil {
		in.emit("dispatch.failed", graph.LevelWarning, item, ev, graph.Field{Key: "endpoint", Value: pr.String()}, graph.Field{Key: "error", Value: err.Error()})
		return err
	}
	if !pasted {
		return in.mark(ctx, ev, stepPaste) // found in the session's history (paste.go)
	}
	in.observe(Observation{Kind: KindPaste, Name: "event-prompt", WorkItem: pr.String(), DeliveryID: ev.DeliveryID, Text: prompt,
		Fields: map[string]any{"tmux_target": res.Record.TmuxName, "respawned": res.Respawn != nil, "work_item": item.String()}})
	if res.Respawn != nil {
		in.emit("dispatch.respawned", graph.LevelInfo, item, ev, graph.Field{Key: "endpoint", Value: pr.String()}, graph.Field{Key: "resumed", Value: res.Respawn.Resumed},
			graph.Field{Key: "fresh_with_artifacts", Value: res.Respawn.Fallback != nil})
		in.link.onPRSpawn(ctx, item, pr, rec.Cwd, res.Record.SessionID) // rebinds the inner loop's session
	}
	in.emit("dispatch.succeeded", graph.LevelInfo, item, ev, graph.Field{Key: "via", Value: "tmux"}, graph.Field{Key: "endpoint", Value: pr.String()})
	return in.mark(ctx, ev, stepPaste)
}

// declined reports that pr gets no session of its own; a reason that the
// next event cannot change is remembered on the link.
func (in *intake) declined(ctx context.Context, item, pr workitem.Ref, ev *ingress.Event, reason string, persist bool, cause error) {
	fields := []graph.Field{{Key: "pull_request", Value: pr.String()}, {Key: "reason", Value: reason}}
	if cause != nil {
		fields = append(fields, graph.Field{Key: "error", Value: cause.Error()})
	}
	in.emit("session.pr_session_declined", graph.LevelInfo, item, ev, fields...)
	if !persist {
		return
	}
	_, _ = in.reg.Update(ctx, item, func(r *sessions.Record, exists bool) error {
		if !exists {
			return sessions.ErrNoRecord
		}
		l, ok := r.PR(pr)
		if !ok {
			return errors.New("pull request not linked")
		}
		l.Declined = reason
		r.SetPR(l)
		return nil
	})
}

// prCheckout prepares the PR's own checkout, or says why it cannot have
// one (reason) and whether that will stay so (persist).
func (in *intake) prCheckout(ctx context.Context, item workitem.Ref, rec sessions.Record, link sessions.PRLink, ev *ingress.Event) (cwd, reason string, persist bool, cause error) {
	pr := link.PR
	if in.ws == nil {
		return "", sessions.DeclinedNoSeparateCheckout, true, nil
	}
	if link.Branch == "" {
		// A later pull_request event will say which branch.
		return "", sessions.DeclinedNoSeparateCheckout, false, errors.New("the pull request's head branch is not known yet")
	}
	if !link.Fork && sameRepo(pr, item) && link.Branch == in.branchOf(ctx, rec.Cwd, item) {
		return "", sessions.DeclinedSharedWorktree, true, nil
	}
	opts := sessions.PrepareOptions{Branch: link.Branch, RequireBranch: true}
	if link.Fork {
		// The head branch is the fork's: check out the base repository's
		// refs/pull/<n>/head as pr-<n>, never a same-named branch of it.
		opts.Branch, opts.FetchRef = fmt.Sprintf("pr-%d", pr.Number), fmt.Sprintf("refs/pull/%d/head", pr.Number)
	}
	opts.CloneURL = in.clone(pr, ev)
	w, err := in.ws.Prepare(ctx, pr, opts)
	if err != nil {
		return "", sessions.DeclinedWorkspaceFailed, false, err
	}
	if w.Dir == rec.Cwd {
		return "", sessions.DeclinedSharedWorktree, true, nil
	}
	in.emit("workspace.prepared", graph.LevelInfo, pr, ev, graph.Field{Key: "cwd", Value: w.Dir}, graph.Field{Key: "reused", Value: w.Reused},
		graph.Field{Key: "branch", Value: w.Branch})
	return w.Dir, "", false, nil
}

// branchOf is the branch checked out in dir (the work item's own branch
// when its HEAD does not name one). It reads dir's HEAD file
// (sessions.CheckedOutBranch), never runs git in the agent's checkout.
func (in *intake) branchOf(_ context.Context, dir string, item workitem.Ref) string {
	if b, err := sessions.CheckedOutBranch(dir); err == nil {
		return b
	}
	return item.Branch()
}

// spawnEndpoint gives a linked PR its own session, or reports why not.
func (in *intake) spawnEndpoint(ctx context.Context, item workitem.Ref, rec sessions.Record, link sessions.PRLink, ev *ingress.Event, gc *graphContext) (bool, error) {
	pr := link.PR
	cwd, reason, persist, cause := in.prCheckout(ctx, item, rec, link, ev)
	if reason != "" {
		in.declined(ctx, item, pr, ev, reason, persist, cause)
		return false, nil
	}
	n, repo := claimFor(item, pr)
	prompt := renderPrompt(in.conf().SpawnPromptTemplate, true, promptInput{WorkItem: pr.String(), Event: ev, Interaction: in.conf().InteractionMode, Graph: gc, ClaimPR: n, ClaimPRRepo: repo})
	// The intent goes first: a redelivery that finds the PR's session live
	// knows it is this event's (see toPREndpoint).
	if err := in.mark(ctx, ev, stepPRSpawn); err != nil {
		return true, err
	}
	var res sessions.SpawnResult
	pasted, err := in.pasteOnce(ctx, pr, sessions.Record{Item: pr, TmuxName: sessions.TmuxName(pr)}, ev.DeliveryID+stepPaste, prompt, func(text string) error {
		var err error
		prompt = text
		res, err = in.mgr.Spawn(ctx, sessions.SpawnRequest{Item: pr, Parent: item, Cwd: cwd, Prompt: text})
		return err
	})
	if err == nil && !pasted {
		res.Record, err = in.reg.Get(pr) // a session that heard it is running: this event's
	}
	if errors.Is(err, errInjectedCrash) {
		return true, err
	}
	if err != nil {
		// The event still reaches the work: the work item's own session.
		in.emit("session.pr_spawn_failed", graph.LevelWarning, item, ev, graph.Field{Key: "pull_request", Value: pr.String()}, graph.Field{Key: "error", Value: err.Error()})
		return false, nil
	}
	in.notePR(pr, item)
	in.link.onPRSpawn(ctx, item, pr, rec.Cwd, res.Record.SessionID)
	in.observe(Observation{Kind: KindPaste, Name: "spawn-prompt", WorkItem: pr.String(), DeliveryID: ev.DeliveryID, Text: prompt,
		Fields: map[string]any{"tmux_target": res.Record.TmuxName, "work_item": item.String()}})
	in.emit("session.pr_spawned", graph.LevelInfo, item, ev, graph.Field{Key: "pull_request", Value: pr.String()},
		graph.Field{Key: "tmux_target", Value: res.Record.TmuxName}, graph.Field{Key: "cwd", Value: cwd}, graph.Field{Key: "harness_session_id", Value: res.Record.SessionID})
	if err := in.mark(ctx, ev, stepPaste); err != nil {
		return true, err
	}
	in.announcePR(ctx, item, res.Record, ev)
	return true, nil
}

// announcePR posts the marked announcement of a PR's own session on the PR
// (best-effort: the session works without it).
func (in *intake) announcePR(ctx context.Context, item workitem.Ref, ep sessions.Record, ev *ingress.Event) {
	if !in.conf().AnnounceEnabled || ep.Item.Provider != "github" || in.done(ctx, ev, stepPRAnnounce) {
		return
	}
	body := fmt.Sprintf("the-loop started a %s session for this pull request (part of %s) in tmux session `%s`.\n\nWatch or take over on the daemon's host:\n\n```\n%s\n```\n",
		ep.Harness, item, ep.TmuxName, in.attachCommand(ep.TmuxName))
	if _, err := in.integ.Call(ctx, ops.GitHubAddComment, map[string]any{"ref": ep.Item.String(), "body": hooks.Mark(body)}); err != nil {
		in.emit("session.announce_failed", graph.LevelWarning, ep.Item, ev, graph.Field{Key: "error", Value: err.Error()})
		return
	}
	in.emit("session.announced", graph.LevelInfo, ep.Item, ev, graph.Field{Key: "tmux_target", Value: ep.TmuxName}, graph.Field{Key: "work_item_of", Value: item.String()})
	_ = in.mark(ctx, ev, stepPRAnnounce)
}

// closePR handles a linked pull request closing (merged or not): its own
// session ends (kept or killed per the close settings) and its checkout is
// removed; the work item's session stays open. Nothing is pasted and
// nothing spawned.
func (in *intake) closePR(ctx context.Context, item workitem.Ref, rec sessions.Record, pr workitem.Ref, merged bool, ev *ingress.Event) {
	ep, err := in.reg.Get(pr)
	own := err == nil && ep.Parent == item
	if own {
		in.link.onPRClose(ctx, item, pr, rec.Cwd, ep.SessionID, merged)
	} else {
		in.link.onPRClose(ctx, item, pr, rec.Cwd, "", merged)
	}
	if own && ep.Status.Live() {
		if err := in.mgr.CloseWith(ctx, pr, in.conf().Close); err != nil {
			in.emit("session.close_failed", graph.LevelWarning, pr, ev, graph.Field{Key: "error", Value: err.Error()})
		}
		in.removeCheckout(ctx, pr, ev)
	}
	_, _ = in.reg.Update(ctx, item, func(r *sessions.Record, exists bool) error {
		if !exists {
			return sessions.ErrNoRecord
		}
		l, ok := r.PR(pr)
		if !ok {
			l = sessions.PRLink{PR: pr, Linked: in.now().UTC().Truncate(time.Second)}
		}
		l.Closed = true
		r.SetPR(l)
		return nil
	})
	in.notePR(pr, item)
	reason := "pr-closed"
	if merged {
		reason = "pr-merged"
	}
	in.emit("session.pr_closed", graph.LevelInfo, item, ev, graph.Field{Key: "pull_request", Value: pr.String()}, graph.Field{Key: "merged", Value: merged})
	in.emit("session.kept_open", graph.LevelInfo, item, ev, graph.Field{Key: "pull_request", Value: pr.String()}, graph.Field{Key: "reason", Value: reason})
}

// endPRSessions ends the own sessions of the work item's pull requests when
// the work item's session ends (closed, stopped) — kept or killed per the
// close settings, checkouts removed unless kept — or, for a cleanup,
// removes them entirely (tmux session, record, checkout).
func (in *intake) endPRSessions(ctx context.Context, item workitem.Ref, rec sessions.Record, ev *ingress.Event, cleanup bool) {
	for _, l := range rec.PullRequests {
		ep, err := in.reg.Get(l.PR)
		if err != nil || ep.Parent != item {
			continue
		}
		if cleanup {
			_ = in.mgr.Close(ctx, l.PR, false)
			_ = in.reg.Delete(ctx, l.PR)
			if in.ws != nil {
				_ = in.ws.Remove(ctx, l.PR)
			}
			in.emit("session.pr_cleaned", graph.LevelInfo, item, ev, graph.Field{Key: "pull_request", Value: l.PR.String()})
			continue
		}
		if !ep.Status.Live() {
			continue
		}
		in.link.onPRClose(ctx, item, l.PR, rec.Cwd, ep.SessionID, false)
		if err := in.mgr.CloseWith(ctx, l.PR, in.conf().Close); err != nil {
			in.emit("session.close_failed", graph.LevelWarning, l.PR, ev, graph.Field{Key: "error", Value: err.Error()})
		}
		in.removeCheckout(ctx, l.PR, ev)
		in.emit("session.pr_closed", graph.LevelInfo, item, ev, graph.Field{Key: "pull_request", Value: l.PR.String()}, graph.Field{Key: "merged", Value: false})
	}
}

// LinkPR links a pull request to a work item's live session on an
// operator's or the agent's request (`loopctl sessions link-pr`,
// POST /sessions/link-pr): pullRequest is "#5", "5" (the work item's
// repository) or a full ref. It implements apiserver.PRLinker.
func (o *operatorDesk) LinkPR(ctx context.Context, ref, pullRequest string) (api.LinkPRResult, error) {
	item, err := parseRef(ref)
	if err != nil {
		return api.LinkPRResult{}, err
	}
	pr, err := parsePRArg(item, pullRequest)
	if err != nil {
		return api.LinkPRResult{}, err
	}
	if pr == item {
		return api.LinkPRResult{}, fmt.Errorf("%w: %s is the work item itself", apiserver.ErrBadRequest, pr)
	}
	o.policy.RLock()
	defer o.policy.RUnlock()
	rec, err := o.reg.Get(item)
	if err != nil {
		return api.LinkPRResult{}, err
	}
	if !rec.Status.Live() || !rec.Parent.IsZero() {
		return api.LinkPRResult{}, fmt.Errorf("%w: %s has no live work-item session to link %s to; start it first", apiserver.ErrBadRequest, item, pr)
	}
	res := api.LinkPRResult{Ref: item.String(), PullRequest: pr.String()}
	_, err = o.reg.Update(ctx, item, func(r *sessions.Record, exists bool) error {
		if !exists {
			return sessions.ErrNoRecord
		}
		if _, ok := r.PR(pr); ok {
			return nil
		}
		res.Linked = r.SetPR(sessions.PRLink{PR: pr, Linked: o.now().UTC().Truncate(time.Second)})
		return nil
	})
	if err != nil {
		return api.LinkPRResult{}, err
	}
	o.intake.notePR(pr, item)
	if res.Linked {
		o.emit("session.pr_linked", graph.LevelInfo, graph.Field{Key: "work_item", Value: item.String()},
			graph.Field{Key: "pull_request", Value: pr.String()}, graph.Field{Key: "via", Value: "cli"})
	}
	return res, nil
}

var _ apiserver.PRLinker = (*operatorDesk)(nil)

// parsePRArg reads "#5", "5" (in item's repository) or a full ref.
func parsePRArg(item workitem.Ref, s string) (workitem.Ref, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(strings.TrimPrefix(s, "#")); err == nil {
		if n <= 0 {
			return workitem.Ref{}, fmt.Errorf("%w: pull request number %d", apiserver.ErrBadRequest, n)
		}
		pr := item
		pr.Number = n
		return pr, nil
	}
	pr, err := workitem.Parse(s)
	if err != nil {
		return pr, fmt.Errorf("%w: pull request %q: use #57, 57 or github:owner/repo#57 (%v)", apiserver.ErrBadRequest, s, err)
	}
	return pr, nil
}
