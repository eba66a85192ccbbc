package workitem

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The cases of sessions' ParseWorkItem and integrations' ParseRef, merged.
// Where the two disagreed, the comment on the case says which rule won.
func TestParse(t *testing.T) {
	tests := []struct {
		in              string
		canonical, slug string
		spec            string
		wantErr         string // substring of the error; "" = valid
	}{
		{in: "github:octo/repo#15", canonical: "github:octo/repo#15", slug: "github-octo-repo-15", spec: "issue-15"},
		{in: "  github:github.com/octo/repo#15 ", canonical: "github:octo/repo#15", slug: "github-octo-repo-15", spec: "issue-15"},
		{in: "github:GHE.corp.example/octo/repo#7", canonical: "github:ghe.corp.example/octo/repo#7", slug: "github-ghe.corp.example-octo-repo-7", spec: "issue-7"},
		{in: "github:ghe.corp.example:8443/my.org/my.repo#3", canonical: "github:ghe.corp.example:8443/my.org/my.repo#3", slug: "github-ghe.corp.example-8443-my.org-my.repo-3", spec: "issue-3"},
		{in: "gitlab:gitlab:8080/a/b#9", canonical: "gitlab:gitlab:8080/a/b#9", slug: "gitlab-gitlab-8080-a-b-9"},
		{in: "jira:a/b#1", canonical: "jira:a/b#1", slug: "jira-a-b-1"},
		// github.com stays for another provider: it is only github's default.
		{in: "gitlab:github.com/a/b#1", canonical: "gitlab:github.com/a/b#1", slug: "gitlab-github.com-a-b-1"},
		{in: "github:octo/repo#007", canonical: "github:octo/repo#7", slug: "github-octo-repo-7", spec: "issue-7"},
		// integrations accepted numbers up to 2^31-1, sessions only 9
		// digits: GitHub's numbers are 32-bit, so the wider rule won.
		{in: "github:octo/repo#1234567890", canonical: "github:octo/repo#1234567890", slug: "github-octo-repo-1234567890", spec: "issue-1234567890"},
		{in: "github:octo/repo#2147483647", canonical: "github:octo/repo#2147483647", slug: "github-octo-repo-2147483647", spec: "issue-2147483647"},
		// integrations accepted a leading "." or "_" (GitHub's .github
		// repositories), sessions did not: the names are safe as one path
		// component and as an argument, so the wider rule won.
		{in: "github:octo/.github#3", canonical: "github:octo/.github#3", slug: "github-octo-.github-3", spec: "issue-3"},
		{in: "github:octo/_site#4", canonical: "github:octo/_site#4", slug: "github-octo-_site-4", spec: "issue-4"},
		{in: "github:octo/repo", wantErr: "want <provider>"},
		{in: "github:octo#1", wantErr: "owner/repo or host/owner/repo"},
		{in: "github:a/b/c/d#1", wantErr: "owner/repo or host/owner/repo"},
		{in: "github:singlelabel/o/r#1", wantErr: "host"},
		// integrations took any 1–5 digit port; sessions checked the range:
		// the stricter rule won.
		{in: "github:host:99999/o/r#1", wantErr: "host"},
		{in: "github:host:0/o/r#1", wantErr: "host"},
		{in: "github:host:08443/o/r#1", wantErr: "host"},
		{in: "github:../repo#1", wantErr: "owner"},
		{in: "github:octo/..#1", wantErr: "repo"},
		{in: "github:octo/.#1", wantErr: "repo"},
		// integrations accepted a leading "-", which git would read as an
		// option: the stricter rule won.
		{in: "github:octo/-repo#1", wantErr: "repo"},
		{in: "github:-octo/repo#1", wantErr: "owner"},
		{in: "github:octo/re po#1", wantErr: "repo"},
		{in: "github:octo/repo#0", wantErr: "positive"},
		{in: "github:octo/repo#000", wantErr: "positive"},
		{in: "github:octo/repo#2147483648", wantErr: "larger than"},
		{in: "github:octo/repo#99999999999999999999999", wantErr: "larger than"},
		{in: "GitHub:octo/repo#1", wantErr: "want <provider>"},
		{in: "github:octo/repo#1;rm", wantErr: "want <provider>"},
		{in: "github:a/b#1#2", wantErr: "want <provider>"},
		{in: "github:" + strings.Repeat("a", MaxPart+1) + "/b#1", wantErr: "owner"},
		{in: "github:o/" + strings.Repeat("r", MaxLen) + "#1", wantErr: "longer than"},
		{in: "", wantErr: "want <provider>"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := Parse(tt.in)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrInvalid)
				require.ErrorContains(t, err, tt.wantErr)
				require.LessOrEqual(t, len(err.Error()), 400, "hostile input is clipped in the message")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.canonical, r.String())
			require.Equal(t, tt.slug, r.Slug())
			require.Equal(t, tt.spec, r.SpecID())
		})
	}
}

func TestParseRepo(t *testing.T) {
	tests := []struct {
		in                string
		host, owner, repo string
		wantErr           bool
	}{
		{in: "octo/repo", owner: "octo", repo: "repo"},
		{in: "github.com/octo/repo", owner: "octo", repo: "repo"},
		{in: "GHE.corp:8443/octo/repo", host: "ghe.corp:8443", owner: "octo", repo: "repo"},
		{in: "octo/.github", owner: "octo", repo: ".github"},
		{in: "octo", wantErr: true},
		{in: "a/b/c/d", wantErr: true},
		{in: "octo/-x", wantErr: true},
		{in: "nohost/octo/repo", wantErr: true},
		{in: "octo/..", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			host, owner, repo, err := ParseRepo(tt.in)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrInvalid)
				return
			}
			require.NoError(t, err)
			require.Equal(t, []string{tt.host, tt.owner, tt.repo}, []string{host, owner, repo})
		})
	}
}

func TestEnvURLAndBranch(t *testing.T) {
	gh, err := Parse("github:octo/repo#15")
	require.NoError(t, err)
	require.Equal(t, "issue-15", gh.WorkItemEnv())
	require.Equal(t, "https://github.com/octo/repo/issues/15", gh.URL())
	require.Equal(t, "issue-15", gh.Branch())
	require.Equal(t, "github.com", gh.HostOrDefault())

	ghe, err := Parse("github:ghe.corp/octo/repo#2")
	require.NoError(t, err)
	require.Equal(t, "https://ghe.corp/octo/repo/issues/2", ghe.URL())

	gl, err := Parse("gitlab:gitlab.example/a/b#2")
	require.NoError(t, err)
	require.Equal(t, "gitlab:gitlab.example/a/b#2", gl.WorkItemEnv())
	require.Empty(t, gl.URL())
	require.False(t, gl.IsZero())
	require.True(t, Ref{}.IsZero())
}

// Slugs are lossy; the session registry and workspaces must notice (see
// sessions' TestRegistrySlugCollision). This pins down that the collision is
// real.
func TestSlugCollisionExists(t *testing.T) {
	a, err := Parse("github:a-b/c#1")
	require.NoError(t, err)
	b, err := Parse("github:a/b-c#1")
	require.NoError(t, err)
	require.Equal(t, a.Slug(), b.Slug())
	require.NotEqual(t, a, b)
}

var (
	slugShape   = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	branchShape = regexp.MustCompile(`^issue-[1-9][0-9]*$`)
)

// FuzzParse: whatever Parse accepts round-trips through String, and every
// name derived from it is safe as a file name, an argument and a URL path.
// Run with `go test -fuzz=FuzzParse -fuzztime=60s ./workitem`.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"github:octo/repo#15", "github:ghe.corp.example:8443/my.org/my.repo#3", "gitlab:h:1/a/b#1",
		"github:github.com/o/r#1", "github:host:8443/o/r#2", "jira:a/b#1", " github:o/r#3 ", "github:o/.github#4",
		"github:octo/repo#0", "x:#1", "github:a/b#1#2", "github:/a/b#1", "github:a/b/#1", "github:a..b/c#1",
		"github:a/b\x00#1", "github:ü/b#1", "github:a.b:65535/c/d#999999999", "github:o/r#99999999999",
		"github:../r#1", "github:o/-r#1", "#1", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if r.Number <= 0 || r.Number > MaxNumber || !ValidName(r.Owner) || !ValidName(r.Repo) || (r.Host != "" && !ValidHost(r.Host)) {
			t.Fatalf("accepted an invalid ref %q: %+v", s, r)
		}
		if r.Provider == "github" && r.Host == DefaultGitHubHost {
			t.Fatalf("%q kept github's default host", s)
		}
		again, err := Parse(r.String())
		if err != nil || again != r {
			t.Fatalf("round trip of %q: %+v → %q → %+v, %v", s, r, r.String(), again, err)
		}
		if c, err := r.Canonical(); err != nil || c != r {
			t.Fatalf("Parse(%q) = %+v is not canonical: %+v, %v", s, r, c, err)
		}
		for _, part := range []string{r.Owner, r.Repo} {
			if strings.HasPrefix(part, "-") || part == "." || part == ".." || strings.ContainsAny(part, "/\\ \x00") {
				t.Fatalf("unsafe owner/repo %q from %q", part, s)
			}
		}
		if !slugShape.MatchString(r.Slug()) {
			t.Fatalf("slug %q of %q has unsafe characters", r.Slug(), s)
		}
		if !branchShape.MatchString(r.Branch()) {
			t.Fatalf("branch %q of %q", r.Branch(), s)
		}
		if h, o, p, err := ParseRepo(r.Host + "/" + r.Owner + "/" + r.Repo); r.Host != "" && (err != nil || o != r.Owner || p != r.Repo || (h != r.Host && r.Provider == "github")) {
			t.Fatalf("ParseRepo disagrees with Parse on %q: %q %q %q %v", s, h, o, p, err)
		}
	})
}

func TestCanonical(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Ref
		want Ref
		err  string
	}{
		{"valid", Ref{Provider: "github", Owner: "octo", Repo: "repo", Number: 15}, Ref{Provider: "github", Owner: "octo", Repo: "repo", Number: 15}, ""},
		{"host lower-cased", Ref{Provider: "github", Host: "GHE.Corp.Example:8443", Owner: "o", Repo: "r", Number: 1}, Ref{Provider: "github", Host: "ghe.corp.example:8443", Owner: "o", Repo: "r", Number: 1}, ""},
		{"default host dropped", Ref{Provider: "github", Host: "GitHub.com", Owner: "o", Repo: "r", Number: 1}, Ref{Provider: "github", Owner: "o", Repo: "r", Number: 1}, ""},
		{"zero", Ref{}, Ref{}, "provider"},
		{"bad provider", Ref{Provider: "Git", Owner: "o", Repo: "r", Number: 1}, Ref{}, "provider"},
		{"number zero", Ref{Provider: "github", Owner: "o", Repo: "r"}, Ref{}, "number 0"},
		{"number too large", Ref{Provider: "github", Owner: "o", Repo: "r", Number: MaxNumber + 1}, Ref{}, "number"},
		{"owner with a slash", Ref{Provider: "github", Owner: "h.example/octo", Repo: "r", Number: 1}, Ref{}, "owner"},
		{"repo option", Ref{Provider: "github", Owner: "o", Repo: "-r", Number: 1}, Ref{}, "repo"},
		{"single-label host", Ref{Provider: "github", Host: "h", Owner: "o", Repo: "r", Number: 1}, Ref{}, "host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.in.Canonical()
			if tc.err != "" {
				require.ErrorIs(t, err, ErrInvalid)
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// FuzzCanonical: a Ref built from any fields that Canonical accepts is what
// Parse reads from its string, and every ref Parse accepts is canonical.
// Run with `go test -fuzz=FuzzCanonical -fuzztime=60s ./workitem`.
func FuzzCanonical(f *testing.F) {
	f.Add("github", "", "octo", "repo", 15)
	f.Add("github", "GitHub.com", "o", "r", 1)
	f.Add("gitlab", "h:1", "a", "b", 1)
	f.Add("github", "", "h.example/octo", "r", 1)
	f.Add("github", "x.com", "o", "r", 0)
	f.Fuzz(func(t *testing.T, provider, host, owner, repo string, n int) {
		r := Ref{Provider: provider, Host: host, Owner: owner, Repo: repo, Number: n}
		got, err := r.Canonical()
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		parsed, err := Parse(r.String())
		if err != nil || parsed != got {
			t.Fatalf("Canonical(%+v) = %+v, Parse(%q) = %+v, %v", r, got, r.String(), parsed, err)
		}
		if again, err := got.Canonical(); err != nil || again != got {
			t.Fatalf("Canonical is not idempotent on %+v: %+v, %v", got, again, err)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("github:ghe.corp.example:8443/octo/repo#12345"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestParseJiraKey(t *testing.T) {
	for in, want := range map[string]string{"PROJ-123": "PROJ-123", "jira:A1_B-7": "A1_B-7", " jira:X-1 ": "X-1"} {
		got, err := ParseJiraKey(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got)
	}
	for _, in := range []string{"", "proj-1", "PROJ-0", "PROJ-01", "PROJ-99999999999", "1PROJ-2", "PROJ 1", "github:o/r#1", "jira:", "PROJ-2147483648"} {
		_, err := ParseJiraKey(in)
		require.ErrorIs(t, err, ErrInvalid, in)
	}
	require.True(t, IsJiraRef("jira:PROJ-9"))
	require.False(t, IsJiraRef("PROJ-9"), "a bare key is an id, not a ref")
	require.Equal(t, "jira:PROJ-9", JiraRef("PROJ-9"))
}

func FuzzParseJiraKey(f *testing.F) {
	for _, s := range []string{"PROJ-123", "jira:A-1", "a-1", "PROJ-0", "PROJ-2147483647"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseJiraKey(s)
		if err != nil {
			return
		}
		again, err := ParseJiraKey(JiraRef(k))
		if err != nil || again != k {
			t.Fatalf("%q → %q does not round-trip through its ref (%v)", s, k, err)
		}
		if strings.ContainsAny(k, "/\\ \x00") {
			t.Fatalf("key %q holds a separator", k)
		}
	})
}
