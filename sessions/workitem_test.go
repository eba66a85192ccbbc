package sessions

import (
	"errors"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseWorkItem(t *testing.T) {
	tests := []struct {
		in                    string
		canonical, slug, tmux string
		spec                  string
		wantErr               bool
	}{
		{in: "github:octo/repo#15", canonical: "github:octo/repo#15", slug: "github-octo-repo-15", tmux: "loop-github-octo-repo-15", spec: "issue-15"},
		{in: "  github:github.com/octo/repo#15 ", canonical: "github:octo/repo#15", slug: "github-octo-repo-15", tmux: "loop-github-octo-repo-15", spec: "issue-15"},
		{in: "github:GHE.corp.example/octo/repo#7", canonical: "github:ghe.corp.example/octo/repo#7", slug: "github-ghe.corp.example-octo-repo-7", tmux: "loop-github-ghe_corp_example-octo-repo-7", spec: "issue-7"},
		{in: "github:ghe.corp.example:8443/my.org/my.repo#3", canonical: "github:ghe.corp.example:8443/my.org/my.repo#3", slug: "github-ghe.corp.example-8443-my.org-my.repo-3", tmux: "loop-github-ghe_corp_example-8443-my_org-my_repo-3", spec: "issue-3"},
		{in: "gitlab:gitlab:8080/a/b#9", canonical: "gitlab:gitlab:8080/a/b#9", slug: "gitlab-gitlab-8080-a-b-9", tmux: "loop-gitlab-gitlab-8080-a-b-9"},
		{in: "github:octo/repo#007", canonical: "github:octo/repo#7", slug: "github-octo-repo-7", tmux: "loop-github-octo-repo-7", spec: "issue-7"},
		{in: "github:octo/repo", wantErr: true},
		{in: "github:octo#1", wantErr: true},
		{in: "github:a/b/c/d#1", wantErr: true},
		{in: "github:singlelabel/o/r#1", wantErr: true},
		{in: "github:host:99999/o/r#1", wantErr: true},
		{in: "github:../repo#1", wantErr: true},
		{in: "github:octo/-repo#1", wantErr: true},
		{in: "github:octo/re po#1", wantErr: true},
		{in: "github:octo/repo#0", wantErr: true},
		{in: "github:octo/repo#1234567890", wantErr: true},
		{in: "GitHub:octo/repo#1", wantErr: true},
		{in: "github:octo/repo#1;rm", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			w, err := ParseWorkItem(tt.in)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrInvalidWorkItem)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.canonical, w.String())
			require.Equal(t, tt.slug, w.Slug())
			require.Equal(t, tt.tmux, w.TmuxName())
			require.Equal(t, tt.spec, w.SpecID())
		})
	}
}

func TestWorkItemEnvAndURL(t *testing.T) {
	gh, err := ParseWorkItem("github:octo/repo#15")
	require.NoError(t, err)
	require.Equal(t, "issue-15", gh.WorkItemEnv())
	require.Equal(t, "https://github.com/octo/repo/issues/15", gh.URL())
	require.Equal(t, "issue-15", gh.Branch())

	gl, err := ParseWorkItem("gitlab:gitlab.example/a/b#2")
	require.NoError(t, err)
	require.Equal(t, "gitlab:gitlab.example/a/b#2", gl.WorkItemEnv())
	require.Empty(t, gl.URL())
}

// Slugs are lossy; the registry and workspaces must notice (see
// TestRegistrySlugCollision). This pins down that the collision is real.
func TestSlugCollisionExists(t *testing.T) {
	a, err := ParseWorkItem("github:a-b/c#1")
	require.NoError(t, err)
	b, err := ParseWorkItem("github:a/b-c#1")
	require.NoError(t, err)
	require.Equal(t, a.Slug(), b.Slug())
	require.NotEqual(t, a, b)
}

var (
	slugShape = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	tmuxShape = regexp.MustCompile(`^loop-[A-Za-z0-9_-]+$`)
)

func FuzzParseWorkItem(f *testing.F) {
	for _, s := range []string{
		"github:octo/repo#15", "github:ghe.corp.example:8443/my.org/my.repo#3", "gitlab:h:1/a/b#1",
		"github:octo/repo#0", "x:#1", "github:a/b#1#2", "github:/a/b#1", "github:a/b/#1", "github:a..b/c#1",
		"github:a/b\x00#1", "github:ü/b#1", "github:a.b:65535/c/d#999999999",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := ParseWorkItem(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidWorkItem) {
				t.Fatalf("error %v does not wrap ErrInvalidWorkItem", err)
			}
			return
		}
		again, err := ParseWorkItem(w.String())
		if err != nil || again != w {
			t.Fatalf("round trip of %q: %q -> %+v, %v", s, w.String(), again, err)
		}
		if !slugShape.MatchString(w.Slug()) {
			t.Fatalf("slug %q of %q has unsafe characters", w.Slug(), s)
		}
		if n := w.TmuxName(); !tmuxShape.MatchString(n) || !IsLoopSessionName(n) || SanitizeTmuxName(n) != n {
			t.Fatalf("tmux name %q of %q is not a stable loop name", n, s)
		}
		if err := ValidateBranch(w.Branch()); err != nil {
			t.Fatalf("branch of %q: %v", s, err)
		}
	})
}
