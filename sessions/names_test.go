package sessions

import (
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/theloop-dev/theloop/workitem"
)

func TestSanitizeTmuxName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"loop-github-octo-repo-15", "loop-github-octo-repo-15"},
		{"loop-github-ghe.corp.example-8443-octo-repo-1", "loop-github-ghe_corp_example-8443-octo-repo-1"},
		{"loop-a:b.c", "loop-a_b_c"},
		{"loop-a b;c", "loop-a-b-c"},
		{"loop-ü", "loop--"},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			require.Equal(t, tt.want, SanitizeTmuxName(tt.in))
		})
	}
}

func TestIsLoopSessionName(t *testing.T) {
	for name, want := range map[string]bool{
		"loop-github-octo-repo-15": true, "loop-a_b": true,
		"loop-": false, "loop": false, "main": false, "loop-a.b": false, "loop-a:b": false,
		"xloop-a": false, "loop-a;": false, "loop-a\n": false,
	} {
		require.Equal(t, want, IsLoopSessionName(name), name)
	}
}

func TestValidSessionID(t *testing.T) {
	id, err := NewSessionID()
	require.NoError(t, err)
	for id, want := range map[string]bool{
		id: true, "abc": true, "a.b_c-d": true, strings.Repeat("a", 128): true,
		"": false, "-abc": false, ".abc": false, "a b": false, "a;b": false, strings.Repeat("a", 129): false,
		"../etc/passwd": false,
	} {
		require.Equal(t, want, ValidSessionID(id), id)
	}
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewSessionID(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		id, err := NewSessionID()
		require.NoError(t, err)
		require.Regexp(t, uuidV4, id)
		require.False(t, seen[id], "duplicate id %s", id)
		seen[id] = true
	}
}

func TestValidateBranch(t *testing.T) {
	for b, ok := range map[string]bool{
		"issue-15": true, "feature/x.y": true, "a/b/c": true, "v1.2": true,
		"": false, "-x": false, "/x": false, "x/": false, "x.": false, "a..b": false, "a//b": false,
		"a/.b": false, ".a": false, "a.lock": false, "a.lock/b": false, "a b": false, "a~b": false,
		"a^b": false, "a:b": false, "a?b": false, "a*b": false, "a[b": false, "a\\b": false, "a@{b": false,
		strings.Repeat("a", 201): false,
	} {
		err := ValidateBranch(b)
		if ok {
			require.NoError(t, err, b)
		} else {
			require.ErrorIs(t, err, ErrInvalidName, b)
		}
	}
}

func FuzzSanitizeTmuxName(f *testing.F) {
	for _, s := range []string{"loop-a.b:c", "", "loop-ü\x00;", "loop-github-octo-repo-15", "::..", "a\nb"} {
		f.Add(s)
	}
	safe := regexp.MustCompile(`^[A-Za-z0-9_-]*$`)
	f.Fuzz(func(t *testing.T, s string) {
		got := SanitizeTmuxName(s)
		if !safe.MatchString(got) {
			t.Fatalf("SanitizeTmuxName(%q) = %q has unsafe characters", s, got)
		}
		if again := SanitizeTmuxName(got); again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, got, again)
		}
		if strings.HasPrefix(s, "loop-") && len(s) > len("loop-") && !IsLoopSessionName(got) {
			t.Fatalf("loop name %q sanitised to %q, which is not a loop name", s, got)
		}
	})
}

// FuzzValidateBranch checks that every branch we accept is one git accepts
// too (when git is installed), so a validated name never fails at git.
func FuzzValidateBranch(f *testing.F) {
	for _, s := range []string{"issue-15", "a/b", "a..b", "-x", "x.lock", "a/.b", "@", "a@{1}", "héllo", "x/"} {
		f.Add(s)
	}
	git, _ := exec.LookPath("git")
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateBranch(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("error %v does not wrap ErrInvalidName", err)
			}
			return
		}
		if git == "" {
			return
		}
		if out, err := exec.Command(git, "check-ref-format", "--branch", s).CombinedOutput(); err != nil {
			t.Fatalf("accepted %q but git rejects it: %s", s, out)
		}
	})
}

// ValidSessionID is hand-written for speed; it must accept exactly what the
// documented pattern accepts.
func FuzzValidSessionIDMatchesItsPattern(f *testing.F) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	for _, s := range []string{"", "a", "-a", "a-b.c_d", "7b0c2f9e-1d7a-4f7e-9a55-0c1e2d3f4a5b", strings.Repeat("a", 128), strings.Repeat("a", 129), "a b", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := ValidSessionID(id), pattern.MatchString(id); got != want {
			t.Fatalf("ValidSessionID(%q) = %v, the pattern says %v", id, got, want)
		}
	})
}

func TestTmuxName(t *testing.T) {
	for in, want := range map[string]string{
		"github:octo/repo#15":                           "loop-github-octo-repo-15",
		"github:GHE.corp.example/octo/repo#7":           "loop-github-ghe_corp_example-octo-repo-7",
		"github:ghe.corp.example:8443/my.org/my.repo#3": "loop-github-ghe_corp_example-8443-my_org-my_repo-3",
		"gitlab:gitlab:8080/a/b#9":                      "loop-gitlab-gitlab-8080-a-b-9",
		"github:octo/.github#3":                         "loop-github-octo-_github-3",
	} {
		item, err := workitem.Parse(in)
		require.NoError(t, err)
		require.Equal(t, want, TmuxName(item), in)
	}
}

// FuzzTmuxName: every ref workitem accepts has a stable loop-* tmux name and
// a branch and directory names the workspace accepts.
func FuzzTmuxName(f *testing.F) {
	for _, s := range []string{"github:octo/repo#15", "github:ghe.corp.example:8443/my.org/my.repo#3", "gitlab:h:1/a/b#1", "github:o/.github#2", "github:o/_r#3"} {
		f.Add(s)
	}
	tmuxShape := regexp.MustCompile(`^loop-[A-Za-z0-9_-]+$`)
	f.Fuzz(func(t *testing.T, s string) {
		w, err := workitem.Parse(s)
		if err != nil {
			return
		}
		if n := TmuxName(w); !tmuxShape.MatchString(n) || !IsLoopSessionName(n) || SanitizeTmuxName(n) != n {
			t.Fatalf("tmux name %q of %q is not a stable loop name", n, s)
		}
		if err := ValidateBranch(w.Branch()); err != nil {
			t.Fatalf("branch of %q: %v", s, err)
		}
		for _, p := range []string{w.Owner, w.Repo, w.Slug(), strings.ReplaceAll(w.HostOrDefault(), ":", "_")} {
			if p != "" && !validPathPart(p) {
				t.Fatalf("%q of %q cannot be a directory name", p, s)
			}
		}
	})
}
