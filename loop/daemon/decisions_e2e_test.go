package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// docs/decisions.md §19 end to end: the real daemon, its receiver and
// router, the queue and the graph link, against githubsim. A gate moves
// only on a new comment whose sender and author are the authorized person
// and which GitHub, re-read by id, holds exactly as the webhook said.

// forge posts a webhook signed with the daemon's secret — what someone
// holding the secret (not GitHub) can send — and returns the status.
func (w *world) forge(event, delivery string, payload map[string]any) int {
	w.t.Helper()
	body, err := json.Marshal(payload)
	require.NoError(w.t, err)
	req, err := http.NewRequest(http.MethodPost, w.d.WebhookURL(), bytes.NewReader(body))
	require.NoError(w.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", ingress.Sign([]byte(secret), body))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// commentPayload is an issue_comment payload shaped like GitHub's.
func commentPayload(n int, id int64, action, author, sender, body string) map[string]any {
	at := "2026-01-01T00:00:00Z"
	return map[string]any{
		"action":     action,
		"repository": map[string]any{"full_name": repoFull, "html_url": "https://github.com/" + repoFull},
		"issue":      map[string]any{"number": n, "html_url": fmt.Sprintf("https://github.com/%s/issues/%d", repoFull, n)},
		"comment": map[string]any{"id": id, "body": body, "user": map[string]any{"login": author},
			"html_url": fmt.Sprintf("https://github.com/%s/issues/%d#issuecomment-%d", repoFull, n, id), "created_at": at, "updated_at": at},
		"sender": map[string]any{"login": sender},
	}
}

// withField returns the observations named name whose field key is value.
func (w *world) withField(name, key, value string) []daemon.Observation {
	w.obsMu.Lock()
	defer w.obsMu.Unlock()
	var out []daemon.Observation
	for _, o := range w.obs {
		if o.Name == name && fmt.Sprint(o.Fields[key]) == value {
			out = append(out, o)
		}
	}
	return out
}

// forgedCount reads theloop_forged_decisions_total{reason} off the
// daemon's registry.
func (w *world) forgedCount(reason string) float64 {
	w.t.Helper()
	fams, err := w.d.Metrics().Registry().Gather()
	require.NoError(w.t, err)
	for _, f := range fams {
		if f.GetName() != "theloop_forged_decisions_total" {
			continue
		}
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// toRequirementsApproval walks a new work item to requirements-approval.
func (w *world) toRequirementsApproval() int {
	w.t.Helper()
	n := w.openLabeled()
	w.waitIdle()
	_, err := w.sim.Comment(repoFull, n, human, "the-loop execute")
	require.NoError(w.t, err)
	w.waitIdle()
	w.claim(n, "brainstorming", map[string]string{"brainstorm.md": brainstormMD})
	c := w.claim(n, "requirements-definition", map[string]string{"requirements.md": requirementsMD})
	require.Equal(w.t, "requirements-approval", c.CurrentNode, "claim: %+v", c)
	return n
}

func (w *world) requireAtGate(n int, why string) {
	w.t.Helper()
	st := w.state(n)
	require.Equal(w.t, "requirements-approval", st.CurrentNode, why)
	_, decided := st.Decisions.Get("requirements-approval")
	require.False(w.t, decided, "%s: no decision recorded", why)
}

func TestAGateMovesOnlyOnARealDecisionByAnAuthorizedPerson(t *testing.T) {
	w := newWorld(t, nil)
	n := w.toRequirementsApproval()

	// (a) mallory, a collaborator, edits dana's comment into an approval:
	// GitHub sends issue_comment.edited with sender mallory and author
	// dana. The router drops it (sender-not-author); nothing moves.
	reading, err := w.sim.Comment(repoFull, n, human, "Reading the design now")
	require.NoError(t, err)
	w.waitIdle()
	_, err = w.sim.EditComment(repoFull, reading.ID, stranger, "Approved")
	require.NoError(t, err)
	w.waitIdle()
	w.requireAtGate(n, "a collaborator's edit decides nothing")
	dropped := w.withField("routing.dropped", "reason", "sender-not-author")
	require.Len(t, dropped, 1)
	require.Equal(t, "mallory", dropped[0].Fields["sender"])
	require.Equal(t, "dana", dropped[0].Fields["actor"])

	// Even dana's own edit is not a decision (edits never decide).
	_, err = w.sim.EditComment(repoFull, reading.ID, human, "Approved")
	require.NoError(t, err)
	w.waitIdle()
	w.requireAtGate(n, "an edit never decides")
	require.NotEmpty(t, w.withField("graph.skipped", "reason", "not-a-decision (issue_comment.edited)"))

	// (d) sender ≠ author on a created comment, signed with the secret.
	require.Equal(t, http.StatusAccepted, w.forge("issue_comment", "forged-sender", commentPayload(n, 990000002, "created", human, stranger, "Approved")))
	w.waitIdle()
	w.requireAtGate(n, "a comment sent by someone else decides nothing")
	require.Len(t, w.withField("routing.dropped", "reason", "sender-not-author"), 2)

	// (b) a signed webhook for a comment that does not exist: 202 (the
	// signature is good), then the re-read finds nothing. routing.forged,
	// counted; nothing moves.
	require.Equal(t, http.StatusAccepted, w.forge("issue_comment", "forged-missing", commentPayload(n, 990000001, "created", human, human, "Approved")))
	w.waitIdle()
	w.requireAtGate(n, "a comment GitHub does not hold decides nothing")
	forged := w.withField(ingress.EventForged, "reason", daemon.ForgedNotFound)
	require.Len(t, forged, 1)
	require.Equal(t, "990000001", forged[0].Fields["comment_id"])
	require.Equal(t, human, forged[0].Fields["claimed_author"])
	require.Equal(t, w.item(n).String(), forged[0].WorkItem)
	require.Equal(t, 1.0, w.forgedCount(daemon.ForgedNotFound))

	// (c) a real comment whose webhook loopd missed, claimed with another
	// body: refused (other-body).
	w.stop()
	thinking, err := w.sim.Comment(repoFull, n, human, "Let me think about it")
	require.NoError(t, err)
	require.NoError(t, w.sim.WaitDeliveries(context.Background()))
	w.start()
	require.Equal(t, http.StatusAccepted, w.forge("issue_comment", "forged-body", commentPayload(n, thinking.ID, "created", human, human, "Approved")))
	w.waitIdle()
	w.requireAtGate(n, "a body GitHub does not hold decides nothing")
	require.Len(t, w.withField(ingress.EventForged, "reason", daemon.ForgedOtherBody), 1)
	require.Equal(t, 1.0, w.forgedCount(daemon.ForgedOtherBody))

	// (f) GitHub answers 500 to the re-read: nothing moves, the dispatch
	// is retried; (e) once GitHub is back, dana's real approval moves the
	// gate and the decision is signed.
	w.sim.InjectFault(githubsim.Fault{Method: http.MethodGet, PathContains: "/issues/comments/", Status: http.StatusInternalServerError})
	approved, err := w.sim.Comment(repoFull, n, human, "Approved")
	require.NoError(t, err)
	w.eventually("a retried dispatch", func() bool {
		return len(w.observed(daemon.KindTransition, "graph.decision_unverified")) > 0 && w.count("dispatch.retry") > 0
	})
	w.requireAtGate(n, "fail closed while GitHub cannot confirm the comment")
	require.Empty(t, w.withField(ingress.EventForged, "comment_id", fmt.Sprint(approved.ID)), "an outage is not a forgery")
	w.sim.RemoveFaults()
	w.eventually("the gate to move once GitHub is back", func() bool { return w.state(n).CurrentNode == "design" })
	dec, ok := w.state(n).Decisions.Get("requirements-approval")
	require.True(t, ok)
	require.Equal(t, "@"+human, dec.By)
	require.Equal(t, fmt.Sprint(approved.ID), dec.Comment)
	require.NotNil(t, dec.Signature, "signed with the daemon's key (docs/decisions.md §16)")
	w.waitIdle()
}
