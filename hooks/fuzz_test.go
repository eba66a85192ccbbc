package hooks_test

import (
	"strings"
	"testing"

	"github.com/theloop-dev/theloop/hooks"
)

func FuzzFrontMatter(f *testing.F) {
	for _, s := range []string{"---\nstatus: approved\n---\nbody", "---\n: :\n---\n", "---\n- a\n---\nx", "---\nnot closed", "--- \n---", "---\r\nstatus: x\r\n---\r\n", "---\na: &x [*x]\n---\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		fm, body := hooks.FrontMatter(text)
		if fm == nil {
			t.Fatal("front matter is never nil")
		}
		if !strings.HasSuffix(text, body) {
			t.Fatalf("body %q is not a suffix of the text", body)
		}
		// Locking any document yields one whose front matter says approved.
		locked, ok := hooks.SetFrontMatterLock(text, []string{"@a"})
		if !ok {
			if locked != text {
				t.Fatal("a refused lock must change nothing")
			}
			return
		}
		if fm2, _ := hooks.FrontMatter(locked); fm2["status"] != "approved" {
			t.Fatalf("lock did not land on %q: %q", text, locked)
		}
		if !strings.Contains(locked, body) {
			t.Fatalf("locking lost the body of %q", text)
		}
	})
}

func FuzzSections(f *testing.F) {
	for _, s := range []string{"# A\ntext\n## B\n```\n# not\n```\n", "#\n##\n", "```\n# a", "# A\n\n# A\nx"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, s := range hooks.Sections(body) {
			if s.Level < 1 {
				t.Fatalf("bad level %d", s.Level)
			}
			if got, ok := hooks.FindSection(body, s.Title); !ok || got.Title != s.Title {
				t.Fatalf("section %q not found again", s.Title)
			}
		}
	})
}

func FuzzChecklist(f *testing.F) {
	for _, s := range []string{"- [x] design\n- [ ] `critic`\n* [X] a.b-c", "-[ ]x", "- [x] \n", "  - [ ] pr-sessions-always"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, r := range hooks.ParseChecklist(body) {
			if r.Token == "" || strings.ContainsAny(r.Token, " \n`[]") {
				t.Fatalf("bad token %q", r.Token)
			}
		}
	})
}

func FuzzClassify(f *testing.F) {
	for _, s := range []string{"approved", "not approved", "LGTM but nit", "changes requested", "don't ship it", "approved?", "no changes requested, approved"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		switch out := hooks.Classify([]string{body}); out {
		case "", hooks.OutcomeApproved, hooks.OutcomeApprovedWithComments, hooks.OutcomeChangesRequested:
		default:
			t.Fatalf("outcome %q outside the closed set", out)
		}
		// Negating an approval never approves.
		if out := hooks.Classify([]string{"not approved " + body}); out == hooks.OutcomeApproved && !strings.ContainsAny(body, ".,;:!?\n") {
			// "not approved X" can only approve if X holds its own approval.
			if hooks.Classify([]string{body}) == "" {
				t.Fatalf("%q approved only after negation", body)
			}
		}
		_ = hooks.DeclaresDone(body)
		_, _ = hooks.ParseGoal(body)
	})
}

// FuzzSimpleFrontMatter is a differential test: wherever the fast
// front-matter reader answers, the general YAML parser must give exactly the
// same mapping.
func FuzzSimpleFrontMatter(f *testing.F) {
	for _, s := range []string{"status: approved   # locked — by the gate\n     # more\napprovedBy: []  # none\noverrides: {}\nworkItem: \"github:o/r#239\"\n", "a: 'x' #c\nb: \"y\"#c\n", "status: approved\ntags: [cli, graph]\nriskTier: 4\ntitle: \"R: x\"\n", "a: -3\nb: 0\n# c\n", "a: 'x y'\nb: [1, 'q', w]\n", "a: yes\n", "a: 1.5\n", "a: 2026-01-02\n", "a: x #c\n", "a: [ ]\n", "a:\n  - x\n", "approvedBy: [\"@MadaraUchiha-314 (PR #110: \\\"Go ahead\\\", 2026-07-28)\"]\nriskTier: 4   # why\n", "a: [\"x, y\", z]  # c\n", "a: [\"PR #71 review — 'use docs/'\"]\n", "a: [\"\\\\\", \"\"]\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, block string) {
		hooks.CheckSimpleFrontMatterAgrees(t, block)
	})
}

// FuzzToLower: the documents' lower-casing is strings.ToLower, byte for
// byte, on any input (ASCII, other scripts, invalid UTF-8).
func FuzzToLower(f *testing.F) {
	for _, s := range []string{"", "abc", "Trust Boundary", "A — B → C", "\xff\xfeX", "ÀÉÎ İ K", "\u212a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { hooks.CheckToLowerAgrees(t, s) })
}

// FuzzDocumentSections: sections located by byte offsets read exactly as
// the split-and-join Sections does.
func FuzzDocumentSections(f *testing.F) {
	for _, s := range []string{"", "\n", "# A\n", "# A", "---\nx: 1\n---\n# A\nbody\n## B\n\n- [ ] t\n# C\n", "```\n# not\n```\n# A\n  x  \n", "# A\n# A\ntwo\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { hooks.CheckDocumentSections(t, s) })
}

// FuzzLint: the mermaid and structure lints, which search for their
// markers, report exactly what reading every line reports.
func FuzzLint(f *testing.F) {
	for _, s := range []string{"", "```", "```mermaid\nflowchart TD\n  A-->B\n```\n", " \t```mermaid\n\n```", "x ```mermaid\n```\n```mermaid\nsequenceDiagram\n  A->>B: hi\n  ```\n", "```\ncode\n", "\u00a0```mermaid\npie\n\u0085```", "``````mermaid\n```\n", "\t```go\n```\n```"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { hooks.CheckLintAgrees(t, s) })
}

// FuzzContainsLower: the boundary markers' search without lowering the
// body answers as searching the lowered body does.
func FuzzContainsLower(f *testing.F) {
	for _, s := range [][2]string{{"A Trust Boundary here", "trust boundary"}, {"TRUST\nBOUNDARY", "t"}, {"\u212aey İnput", "key input"}, {"Kİ", "ki"}, {"abuse — CASE", "abuse — case"}, {"\xff\xfeX", "\ufffdx"}, {"tt trust", "trust"}, {"", "a"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, body, marker string) { hooks.CheckContainsLowerAgrees(t, body, marker) })
}
