package ingress

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/workitem"
)

// authorityWorld is the real client against githubsim, one fake clock.
func authorityWorld(t *testing.T, rules ...string) (*Authority, *githubsim.Server, *graphtest.Clock) {
	t.Helper()
	clock := graphtest.NewClock(time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC))
	sim, err := githubsim.Start(githubsim.Config{Token: "tok", Now: clock.Now})
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	require.NoError(t, sim.AddRepo("acme/widgets", githubsim.RepoOptions{}))
	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		Transport: integrations.TransportAPI, MaxAttempts: 1, API: integrations.GitHubAPIConfig{BaseURL: sim.URL()},
	}}, integrations.Deps{Env: func(k string) (string, bool) { return "tok", k == "GH_TOKEN" }, Clock: clock})
	require.NoError(t, err)
	a, err := NewAuthority(rules, 30*time.Second, AuthorityDeps{Integrations: set, Clock: clock})
	require.NoError(t, err)
	return a, sim, clock
}

var widgets7 = workitem.Ref{Provider: "github", Owner: "acme", Repo: "widgets", Number: 7}

func authorize(t *testing.T, a *Authority, login string, paths ...string) string {
	t.Helper()
	rule, err := a.Authorize(context.Background(), Subject{Login: login, Item: widgets7, Paths: paths})
	require.NoError(t, err)
	return rule
}

func TestAuthorityLoginRuleAsksNothing(t *testing.T) {
	a, sim, _ := authorityWorld(t, "dana", "@erin")
	require.Equal(t, "dana", authorize(t, a, "dana"))
	require.Equal(t, "@erin", authorize(t, a, "erin"))
	require.Equal(t, "", authorize(t, a, "mallory"))
	require.Empty(t, sim.Requests())
}

func TestAuthorityTeamRemovalTakesEffectWithinTheTTL(t *testing.T) {
	a, sim, clock := authorityWorld(t, "team:acme/reviewers")
	sim.SetTeam("acme", "reviewers", "dana", "erin")
	require.Equal(t, "team:acme/reviewers", authorize(t, a, "dana"))
	require.Equal(t, "", authorize(t, a, "mallory"))

	sim.RemoveTeamMember("acme", "reviewers", "dana")
	clock.Advance(10 * time.Second)
	require.Equal(t, "team:acme/reviewers", authorize(t, a, "dana"), "the cached answer stands within the TTL")
	clock.Advance(21 * time.Second)
	require.Equal(t, "", authorize(t, a, "dana"), "removed from the team: no right once the TTL has passed")
	require.Equal(t, "team:acme/reviewers", authorize(t, a, "erin"))
}

func TestAuthorityPermissionRule(t *testing.T) {
	a, sim, _ := authorityWorld(t, "permission:maintain")
	for login, role := range map[string]string{"ada": "admin", "mo": "maintain", "wes": "write", "tia": "triage"} {
		sim.SetPermission("acme/widgets", login, role)
	}
	require.Equal(t, "permission:maintain", authorize(t, a, "ada"), "admin is above maintain")
	require.Equal(t, "permission:maintain", authorize(t, a, "mo"))
	require.Equal(t, "", authorize(t, a, "wes"))
	require.Equal(t, "", authorize(t, a, "tia"))
	require.Equal(t, "", authorize(t, a, "nobody"), "not a collaborator (404) is no right, not an error")

	w, sim2, _ := authorityWorld(t, "permission:write")
	sim2.SetPermission("acme/widgets", "wes", "write")
	sim2.SetPermission("acme/widgets", "tia", "triage")
	require.Equal(t, "permission:write", authorize(t, w, "wes"))
	require.Equal(t, "", authorize(t, w, "tia"))
}

func TestAuthorityCodeownersPathRule(t *testing.T) {
	a, sim, _ := authorityWorld(t, "codeowners")
	sim.SetTeam("acme", "spec-team", "sam")
	sim.PutFile("acme/widgets", ".github/CODEOWNERS", `# owners
*                       @root
docs/specs/             @acme/spec-team
docs/specs/*/design.md  @dana   # last matching rule wins
`)
	req := "docs/specs/issue-7/requirements.md"
	design := "docs/specs/issue-7/design.md"
	require.Equal(t, "codeowners", authorize(t, a, "sam", req), "a team in CODEOWNERS is resolved")
	require.Equal(t, "", authorize(t, a, "root", req), "a later rule overrides *")
	require.Equal(t, "codeowners", authorize(t, a, "dana", design))
	require.Equal(t, "", authorize(t, a, "sam", design), "the last matching rule wins")
	require.Equal(t, "", authorize(t, a, "dana", req, design), "every gated path must be owned")
	require.Equal(t, "codeowners", authorize(t, a, "root"), "no path: the catch-all rule's owners")
	require.Equal(t, "codeowners", authorize(t, a, "root", "src/main.go"))
}

func TestAuthorityFailsClosedWhenGitHubCannotBeAsked(t *testing.T) {
	a, sim, _ := authorityWorld(t, "team:acme/reviewers")
	sim.SetTeam("acme", "reviewers", "dana")
	sim.InjectFault(githubsim.Fault{PathContains: "/memberships/", Status: http.StatusInternalServerError})
	rule, err := a.Authorize(context.Background(), Subject{Login: "dana", Item: widgets7})
	require.Error(t, err)
	require.Equal(t, "", rule)
}

func TestParseAuthorizedNamesTheBadEntry(t *testing.T) {
	require.NoError(t, ParseAuthorized([]string{"dana", "team:acme/x", "permission:admin", "codeowners", "app[bot]"}))
	for _, bad := range []string{"team:acme", "permission:read", "permission:triage", "team:a/b/c", "dana smith"} {
		err := ParseAuthorized([]string{bad})
		require.ErrorIs(t, err, ErrBadRule, bad)
		require.Contains(t, err.Error(), bad)
	}
}

func TestCodeownersPatterns(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		yes, no []string
	}{
		{"*", []string{"a", "x/y/z.md"}, nil},
		{"*.js", []string{"a.js", "src/x/a.js"}, []string{"a.ts"}},
		{"/build/logs/", []string{"build/logs/a", "build/logs/x/y"}, []string{"x/build/logs/a", "build/logs"}},
		{"docs/*", []string{"docs/a.md"}, []string{"docs/x/b.md", "x/docs/a.md"}},
		{"apps/", []string{"apps/a", "x/apps/b/c"}, []string{"apps"}},
		{"/docs/", []string{"docs/a/b"}, []string{"x/docs/a"}},
		{"**/logs", []string{"logs", "logs/a", "x/y/logs/a"}, []string{"xlogs"}},
		{"docs/**/spec.md", []string{"docs/spec.md", "docs/a/b/spec.md"}, []string{"spec.md"}},
		{"README.md", []string{"README.md", "x/README.md"}, []string{"README.md.bak"}},
	} {
		re, err := codeownersPattern(tc.pattern)
		require.NoError(t, err, tc.pattern)
		for _, p := range tc.yes {
			require.True(t, re.MatchString(p), "%s should match %s", tc.pattern, p)
		}
		for _, p := range tc.no {
			require.False(t, re.MatchString(p), "%s should not match %s", tc.pattern, p)
		}
	}
}
