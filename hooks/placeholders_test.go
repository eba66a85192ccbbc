package hooks

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestPlaceholderFindings(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"filled", "# R\n\n## Context\n\nThe widget is missing.\n", nil},
		{"front matter and body", "---\ntitle: \"TODO(the-loop): the request\"\n---\n\n## Context\n\nTODO(the-loop): who asked.\n",
			[]string{`line 2 still holds the template's placeholder "TODO(the-loop): the request\""`, `line 7 still holds the template's placeholder "TODO(the-loop): who asked."`}},
		{"mid-line", "1. WHEN x TODO(the-loop): the response.\n", []string{`line 1 still holds the template's placeholder "TODO(the-loop): the response."`}},
		{"quoted in a code span", "Templates mark gaps with `TODO(the-loop): …`.\n", nil},
		{"quoted in a fence", "```\nTODO(the-loop): example\n```\nafter\n", nil},
		{"after a closed fence", "```\nx\n```\nTODO(the-loop): left\n", []string{"line 4"}},
		{"unclosed span is text", "a `b TODO(the-loop): left\n", []string{"line 1"}},
		{"many", strings.Repeat("TODO(the-loop): x\n", 8), []string{"line 1", "line 2", "line 3", "line 4", "line 5", "and 3 more lines"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := placeholderFindings(tc.text, "docs/specs/issue-7/requirements.md")
			require.Len(t, got, len(tc.want), "%v", got)
			for i, w := range tc.want {
				require.Contains(t, got[i].Text, w)
				require.Equal(t, "docs/specs/issue-7/requirements.md", got[i].Path)
			}
			if len(got) > 0 && !strings.HasPrefix(tc.want[len(tc.want)-1], "and ") {
				require.Contains(t, got[0].Text, "replace it with your own words")
			}
		})
	}
}

// FuzzPlaceholderFindings: any text is read without a panic, into at most
// six findings of bounded length (valid UTF-8), and text without the marker has none.
func FuzzPlaceholderFindings(f *testing.F) {
	for _, s := range []string{"", "TODO(the-loop): x", "```\nTODO(the-loop)\n```", "`TODO(the-loop)`", "``a`TODO(the-loop)``", "\xffTODO(the-loop)\xfe", strings.Repeat("`", 40) + "TODO(the-loop)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got := placeholderFindings(text, "p")
		if len(got) > maxPlaceholderFindings+1 {
			t.Fatalf("%d findings", len(got))
		}
		if !strings.Contains(text, PlaceholderMarker) && len(got) > 0 {
			t.Fatalf("findings without the marker: %v", got)
		}
		for _, m := range got {
			// The placeholder is clipped to 80 runes, quoted (an escape is at
			// most 10 bytes).
			if len(m.Text) > 300+80*10 || !utf8.ValidString(m.Text) {
				t.Fatalf("a finding of %d bytes: %q", len(m.Text), m.Text)
			}
		}
	})
}
