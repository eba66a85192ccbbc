package daemon_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// appSim is a githubsim serving a GitHub App (id, slug) and the App's
// private key in PEM.
func appSim(t *testing.T, id int64, slug string) (*githubsim.Server, string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	sim, err := githubsim.Start(githubsim.Config{App: &githubsim.AppConfig{ID: id, Slug: slug, PublicKey: &key.PublicKey}})
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	return sim, keyPEM
}

// loopd configured as a GitHub App walks an item end to end against
// githubsim issuing installation tokens as GitHub does, and a gate passes
// on the approval of a team member named only by routing.authorized.
func TestAnItemWalkedAsAGitHubAppApprovedByATeam(t *testing.T) {
	const slug = "theloop-e2e"
	sim, keyPEM := appSim(t, 77, slug)
	sim.SetTeam("octo", "approvers", "erin")

	appCfg := integrations.Config{GitHub: &integrations.GitHubConfig{
		MaxAttempts: 3, TimeoutSeconds: 10,
		App: &integrations.GitHubAppConfig{AppID: 77, Slug: slug},
	}}
	w := newWorldWith(t, sim, func(c *daemon.Config) {
		c.Routing.Authorized = []string{"team:octo/approvers"}
		c.Integrations = appCfg
	}, func(base string) integrations.Config {
		appCfg.GitHub.API.BaseURL = base
		return appCfg
	}, map[string]string{integrations.DefaultGitHubAppKeyEnv: keyPEM})
	_, err := sim.AddInstallation(repoFull)
	require.NoError(t, err)

	n := w.toRequirementsApproval()
	// A stranger's approval is dropped before it reaches anything.
	_, err = sim.Comment(repoFull, n, stranger, "Approved")
	require.NoError(t, err)
	w.waitIdle()
	w.requireAtGate(n, "mallory is on no team")
	require.NotEmpty(t, w.withField("dispatch.dropped", "reason", string(ingress.DropUnauthorized)))

	approved, err := sim.Comment(repoFull, n, "erin", "Approved")
	require.NoError(t, err)
	w.eventually("the gate to move on the team member's approval", func() bool { return w.state(n).CurrentNode == "design" })
	dec, ok := w.state(n).Decisions.Get("requirements-approval")
	require.True(t, ok)
	require.Equal(t, "@erin", dec.By)
	require.Equal(t, "team:octo/approvers", dec.Rule, "the decision records the rule that authorized it")
	require.NotNil(t, dec.Signature)
	require.Equal(t, approved.ID, mustAtoi(t, dec.Comment))

	// Every API call was made with an installation token the App got
	// with its JWT; what loopd posted is by the App's bot.
	require.NotEmpty(t, sim.IssuedTokens())
	for _, r := range sim.Requests() {
		require.True(t, r.Authenticated, "%s %s", r.Method, r.Path)
	}
	cs, err := sim.Comments(repoFull, n)
	require.NoError(t, err)
	bot := 0
	for _, c := range cs {
		if c.Author == slug+"[bot]" {
			bot++
		}
	}
	require.Positive(t, bot, "loopd's comments are by the App's bot")
	w.waitIdle()

	// Control keywords follow the same rules: the team member pauses the
	// session; the stranger's command never reaches the intake's control.
	_, err = sim.Comment(repoFull, n, stranger, "the-loop pause")
	require.NoError(t, err)
	w.waitIdle()
	require.Empty(t, w.withField("control.command", "command", "pause"))
	_, err = sim.Comment(repoFull, n, "erin", "the-loop pause")
	require.NoError(t, err)
	w.eventually("the team member's pause", func() bool { return len(w.withField("control.command", "command", "pause")) == 1 })
	w.waitIdle()
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return n
}

// A submitted review decides a gate as a new comment does: an APPROVED
// review without a word, on the work item's pull request, by an authorized
// reviewer, re-read from GitHub by id; a stranger's review does not.
func TestASubmittedReviewDecidesTheGate(t *testing.T) {
	w, n, pr := reviewedAtRequirementsApproval(t, githubsim.Review{State: "APPROVED"})
	rv, err := w.sim.AddReview(repoFull, pr.Number, githubsim.Review{Author: human, State: "APPROVED"})
	require.NoError(t, err)
	w.eventually("the gate to move on the review", func() bool { return w.state(n).CurrentNode == "design" })
	requireReviewDecision(t, w, n, rv, "approved")
}

// reviewedAtRequirementsApproval is an item at requirements-approval with
// its pull request open, and a stranger's review on it (Author set here)
// that decided nothing.
func reviewedAtRequirementsApproval(t *testing.T, strangers githubsim.Review) (*world, int, githubsim.Issue) {
	t.Helper()
	w := newWorld(t, nil)
	n := w.toRequirementsApproval()
	w.pushBranch("feature-widget")
	pr, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "Widget", Body: fmt.Sprintf("Fixes #%d", n), Head: "feature-widget"})
	require.NoError(t, err)
	w.waitIdle()
	strangers.Author = stranger
	_, err = w.sim.AddReview(repoFull, pr.Number, strangers)
	require.NoError(t, err)
	w.waitIdle()
	w.requireAtGate(n, "a stranger's review decides nothing")
	return w, n, pr
}

// requireReviewDecision: the gate was decided outcome by the authorized
// reviewer's review rv, signed, with the rule that authorized it.
func requireReviewDecision(t *testing.T, w *world, n int, rv githubsim.Review, outcome string) {
	t.Helper()
	dec, ok := w.state(n).Decisions.Get("requirements-approval")
	require.True(t, ok)
	require.Equal(t, outcome, dec.Outcome)
	require.Equal(t, "@"+human, dec.By)
	require.Equal(t, fmt.Sprint(rv.ID), dec.Comment)
	require.Equal(t, ingress.RuleAuthorizedUsers, dec.Rule)
	require.NotNil(t, dec.Signature)
	w.waitIdle()
}

// A review that requests changes, by the authorized reviewer, decides the
// gate the other way: changes-requested, signed, with the rule, and the
// item goes back to requirements-definition; a stranger's does nothing.
func TestAReviewRequestingChangesSendsTheItemBack(t *testing.T) {
	w, n, pr := reviewedAtRequirementsApproval(t, githubsim.Review{State: "CHANGES_REQUESTED", Body: "no"})
	rv, err := w.sim.AddReview(repoFull, pr.Number, githubsim.Review{Author: human, State: "CHANGES_REQUESTED", Body: "The acceptance criteria miss the empty case."})
	require.NoError(t, err)
	w.eventually("the item to go back on the review", func() bool { return w.state(n).CurrentNode == "requirements-definition" })
	requireReviewDecision(t, w, n, rv, "changes-requested")
}
