package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// PR and CI discovery: the reconcile pass's answer to a missed
// pull_request, pull_request_review, check_run or status webhook (GitHub
// does not redeliver). For the tracked work items of a repository it lists
// the repository's newest pull requests, keeps those linked to a tracked
// item the way the router links them (the PR itself, an issue-<n> head
// branch, closing keywords in the body), and for each reads the latest
// review, the head commit's check runs and its combined status.
//
// What it reads is handed to PollerDeps.Observe as webhook-shaped Events —
// the same event names and payload fields the router produces, so the
// dashboard builds its PR/CI state from one code path whichever way the
// facts arrived. They do not go to the Sink: they report state, not
// something anyone did, and are read again every cycle, so queueing them
// would replay the same check to the agent's session once a cycle.
//
// The pass spends at most PollerConfig.PRCICalls GitHub calls a cycle (a
// pull-request listing per repository, then up to three calls per linked
// pull request); what the budget does not reach is taken up first next
// cycle. A rate limit stops the cycle like any other call.

// DefaultPRCICalls is the default per-cycle budget of the PR/CI pass.
const DefaultPRCICalls = 30

// PRCIDeliveryPrefix begins the delivery id of the PR/CI pass's events.
const PRCIDeliveryPrefix = "poll-prci-"

// prciPull is one listed pull request and the tracked items it links to.
type prciPull struct {
	ref            workitem.Ref
	url, state     string
	merged         bool
	headRef, sha   string
	items          []workitem.Ref
	closedOrMerged bool
}

// prciRepo runs the PR/CI pass for one repository's tracked items.
func (p *Poller) prciRepo(ctx context.Context, repo string, tracked []workitem.Ref, st *CycleStats, calls, failed *int) error {
	if p.d.Observe == nil || p.prciLeft < 1 {
		return nil
	}
	host, owner, name := splitRepo(repo)
	var mine []workitem.Ref
	for _, ref := range tracked {
		if strings.EqualFold(ref.Host, host) && strings.EqualFold(ref.Owner, owner) && strings.EqualFold(ref.Repo, name) {
			mine = append(mine, ref)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	p.prciLeft--
	res, err := p.call(ctx, st, calls, failed, ops.GitHubListPulls, map[string]any{"repo": repo, "state": "all"})
	if err != nil {
		st.Failures++
		p.emit(EventPollProviderErr, graph.LevelWarning, graph.Field{Key: "repo", Value: repo}, graph.Field{Key: "error", Value: err.Error()})
		if errors.Is(err, errRateLimited) {
			return err
		}
		return nil
	}
	r := repoOf{host: host, owner: owner, repo: name}
	var linked []prciPull
	raw, _ := res["pulls"].([]any)
	for _, e := range raw {
		v := graph.AsValues(e)
		n, _ := v["number"].(int)
		if n <= 0 {
			continue
		}
		pr := prciPull{ref: r.ref(n), url: v.String("url"), state: v.String("state"), merged: v["merged"] == true,
			headRef: v.String("headRef"), sha: v.String("headSha")}
		pr.closedOrMerged = pr.merged || pr.state == "closed"
		var x extraction
		x.own = pr.ref
		if b := branchIssue(pr.headRef); b > 0 {
			x.add(r.ref(b), RefFromBranch)
		}
		for _, kr := range closingKeywords(v.String("body"), r) {
			x.add(kr, RefFromKeyword)
		}
		x.add(pr.ref, RefFromEntity)
		for _, got := range x.refs {
			for _, want := range mine {
				if sameRef(got, want) {
					pr.items = append(pr.items, want)
				}
			}
		}
		if len(pr.items) > 0 {
			linked = append(linked, pr)
		}
	}
	if len(linked) == 0 {
		return nil
	}
	sort.Slice(linked, func(i, j int) bool { return linked[i].ref.Number < linked[j].ref.Number })
	// Start where the last cycle's budget ran out, so every linked pull
	// request is read within a few cycles however many there are.
	start := p.prciCursor[repo] % len(linked)
	done := 0
	for i := 0; i < len(linked); i++ {
		pr := linked[(start+i)%len(linked)]
		need := 1 // the pull request itself was listed: its reviews
		if !pr.closedOrMerged && validSHA(pr.sha) {
			need += 2 // check runs and combined status
		}
		if p.prciLeft < need {
			break
		}
		if err := p.prciPull(ctx, repo, pr, st, calls, failed); err != nil {
			p.prciCursor[repo] = start + done
			return err
		}
		done++
	}
	p.prciCursor[repo] = start + done
	return nil
}

func validSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// prciPull reads one linked pull request's review and checks and hands
// each fact to Observe. A failed read skips that fact (it is read again
// next cycle); a rate limit stops the cycle.
func (p *Poller) prciPull(ctx context.Context, repo string, pr prciPull, st *CycleStats, calls, failed *int) error {
	refs := append(append([]workitem.Ref(nil), pr.items...), pr.ref)
	prJSON := map[string]any{"number": pr.ref.Number, "html_url": pr.url, "state": pr.state, "merged": pr.merged,
		"head": map[string]any{"ref": pr.headRef, "sha": pr.sha}}
	observe := func(event, action, key string, payload map[string]any) {
		payload["repository"] = map[string]any{"full_name": pr.ref.Owner + "/" + pr.ref.Repo}
		if action != "" {
			payload["action"] = action
		}
		b, _ := json.Marshal(payload)
		p.d.Observe(&Event{Event: event, Action: action, DeliveryID: PRCIDeliveryPrefix + pr.ref.String() + "-" + key,
			Repo: repo, WorkItems: refs, Payload: b, Source: SourcePoll, ReceivedAt: p.d.Clock.Now().UTC()})
		st.PRCIObserved++
	}
	// The pull request first: it binds the head sha statuses are filed under.
	observe(KindPullRequest, "reconciled", "pr", map[string]any{"pull_request": prJSON})

	fail := func(err error) error {
		st.Failures++
		if errors.Is(err, errRateLimited) {
			return err
		}
		return nil
	}
	p.prciLeft--
	res, err := p.call(ctx, st, calls, failed, ops.GitHubListReviews, map[string]any{"ref": pr.ref.String()})
	if err != nil {
		if e := fail(err); e != nil {
			return e
		}
	} else {
		// The latest submitted verdict, as the webhook path keeps it.
		verdict := ""
		list, _ := res["reviews"].([]any)
		for _, e := range list {
			switch s := strings.ToUpper(graph.AsValues(e).String("state")); s {
			case "APPROVED", "CHANGES_REQUESTED", "COMMENTED":
				verdict = s
			}
		}
		if verdict != "" {
			observe(KindPullRequestReview, "submitted", "review", map[string]any{"pull_request": prJSON, "review": map[string]any{"state": strings.ToLower(verdict)}})
		}
	}
	if pr.closedOrMerged || !validSHA(pr.sha) {
		return nil
	}
	p.prciLeft--
	res, err = p.call(ctx, st, calls, failed, ops.GitHubListCheckRuns, map[string]any{"ref": pr.ref.String(), "sha": pr.sha})
	if err != nil {
		if e := fail(err); e != nil {
			return e
		}
	} else {
		runs, _ := res["checkRuns"].([]any)
		for i, e := range runs {
			v := graph.AsValues(e)
			action := "created"
			if v.String("status") == "completed" {
				action = "completed"
			}
			observe(KindCheckRun, action, "check-"+strconv.Itoa(i), map[string]any{"check_run": map[string]any{
				"name": v.String("name"), "status": v.String("status"), "conclusion": v.String("conclusion"),
				"html_url": v.String("url"), "head_sha": pr.sha, "pull_requests": []any{map[string]any{"number": pr.ref.Number}},
			}})
		}
	}
	p.prciLeft--
	res, err = p.call(ctx, st, calls, failed, ops.GitHubCombinedStatus, map[string]any{"ref": pr.ref.String(), "sha": pr.sha})
	if err != nil {
		return fail(err)
	}
	statuses, _ := res["statuses"].([]any)
	for i, e := range statuses {
		v := graph.AsValues(e)
		observe(KindStatus, "", "status-"+strconv.Itoa(i), map[string]any{
			"sha": pr.sha, "state": v.String("state"), "context": v.String("context"), "target_url": v.String("url"),
		})
	}
	return nil
}
