package dashboard

import (
	"bytes"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/theloop-dev/theloop/loop"
)

// allowedMarkup is what a rendered artifact may contain: inert elements,
// and of attributes only a link's target and rel and a task list's
// checkbox state.
var allowedMarkup = map[string][]string{
	"p": nil, "br": nil, "hr": nil, "h1": nil, "h2": nil, "h3": nil, "h4": nil, "h5": nil, "h6": nil,
	"blockquote": nil, "pre": nil, "code": nil, "em": nil, "strong": nil, "del": nil, "ul": nil, "ol": nil, "li": nil,
	"table": nil, "thead": nil, "tbody": nil, "tr": nil, "th": {"align"}, "td": {"align"}, "sup": nil, "sub": nil,
	"a": {"href", "rel", "target"}, "input": {"type", "checked", "disabled"},
}

// checkInert fails unless out (RenderMarkdown's output) holds only
// allowedMarkup, with http(s) links.
func checkInert(t *testing.T, out string) {
	t.Helper()
	z := html.NewTokenizer(strings.NewReader(out))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		attrs, ok := allowedMarkup[tok.Data]
		require.True(t, ok, "element <%s> in %q", tok.Data, out)
		for _, a := range tok.Attr {
			require.Contains(t, attrs, a.Key, "attribute %s on <%s> in %q", a.Key, tok.Data, out)
			if a.Key == "href" {
				u, err := url.Parse(a.Val)
				require.NoError(t, err, "link %q", a.Val)
				require.Contains(t, []string{"http", "https"}, strings.ToLower(u.Scheme), "link %q", a.Val)
			}
			if a.Key == "type" {
				require.Equal(t, "checkbox", a.Val)
			}
		}
	}
}

var hostileMarkdown = []string{
	"<script>alert(1)</script>",
	"<img src=x onerror=alert(1)>",
	"[click](javascript:alert(1))",
	"[data](data:text/html;base64,PHNjcmlwdD4=)",
	"![pixel](https://tracker.example/p.png)",
	"<iframe src=https://evil.example></iframe>",
	"<a href=\"https://ok.example\" onclick=\"x()\" style=\"position:fixed\">a</a>",
	"<style>body{display:none}</style>",
	"<form action=/item/gate method=post><button>go</button></form>",
	"<svg><script>alert(1)</script></svg>",
	"[rel](/item/gate?ref=x)",
	"# Title {#gate-form}\n\n<div id=gate-form>clobber</div>",
	"`<script>`\n\n```html\n<script>alert(1)</script>\n```",
	"<details open ontoggle=alert(1)>x</details>",
}

func TestRenderMarkdownIsInert(t *testing.T) {
	for _, src := range hostileMarkdown {
		out := string(RenderMarkdown([]byte(src)))
		checkInert(t, out)
		for _, bad := range []string{"<script", "onerror", "onclick", "ontoggle", "javascript:", "data:text", "<img", "<iframe", "<style", "<form", "style=", `id="gate-form"`} {
			require.NotContains(t, strings.ToLower(out), bad, "%q rendered as %q", src, out)
		}
	}
	out := string(RenderMarkdown([]byte("---\nstatus: draft\n---\n# Requirements\n\n## Scope\n\n- one\n- [x] done\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n[spec](https://example.com/spec) ~~old~~\n")))
	checkInert(t, out)
	for _, want := range []string{"<h1>Requirements</h1>", "<h2>Scope</h2>", "<li>one</li>", `type="checkbox"`, "<table>", "<td>1</td>", `href="https://example.com/spec"`, `rel="nofollow noreferrer noopener"`, "<del>old</del>"} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "status: draft", "the front matter is shown apart, as text")
	require.LessOrEqual(t, len(RenderMarkdown(bytes.Repeat([]byte("a "), MaxGateArtifact))), 2*MaxGateArtifact, "bounded")
}

// FuzzRenderMarkdown: whatever the agent writes into an artifact, the card
// renders only inert markup.
func FuzzRenderMarkdown(f *testing.F) {
	for _, s := range hostileMarkdown {
		f.Add([]byte(s))
	}
	f.Add([]byte("---\na: b\n---\n# x\n\n<b>raw</b> [l](https://x.example \"t\")\n\n    code\n\n> quote\n\n1. one\n"))
	f.Add([]byte("---\n---\n---"))
	f.Fuzz(func(t *testing.T, src []byte) {
		checkInert(t, string(RenderMarkdown(src)))
		splitFrontMatter(src)
	})
}

func TestSplitFrontMatter(t *testing.T) {
	for _, tc := range []struct{ in, fm, body string }{
		{"---\nstatus: approved\n---\n# T\n", "status: approved\n", "# T\n"},
		{"---\r\nstatus: x\r\n---\r\nbody", "status: x\r\n", "body"},
		{"# no front matter\n---\n", "", "# no front matter\n---\n"},
		{"---\nunterminated\n", "", "---\nunterminated\n"},
		{"---\na: 1\n...\nrest", "a: 1\n", "rest"},
		{"---\na: 1\n---", "a: 1\n", ""},
	} {
		fm, body := splitFrontMatter([]byte(tc.in))
		require.Equal(t, tc.fm, string(fm), tc.in)
		require.Equal(t, tc.body, string(body), tc.in)
	}
}

func TestGateArtifactNames(t *testing.T) {
	for _, tc := range []struct {
		loop, gate string
		want       []string
	}{
		{loop.WorkItemLoop, "requirements-approval", []string{"requirements.md", "bugfix.md"}},
		{loop.WorkItemLoop, "design-approval", []string{"design.md", "testing-plan.md"}},
		{loop.WorkItemLoop, "human-approval", []string{"execution-log.md"}},
		{loop.WorkItemLoop, "phase-selection", nil},
		{loop.WorkItemLoop, "no-such-node", nil},
	} {
		g, err := loop.ShippedGraph(tc.loop)
		require.NoError(t, err)
		require.Equal(t, tc.want, GateArtifactNames(g, tc.gate), tc.gate)
	}
}

func TestLineDiff(t *testing.T) {
	before := "# R\n\n- R1\n- R2\n" + strings.Repeat("same\n", 20) + "tail\n"
	after := "# R\n\n- R1\n- R2 changed\n- R3\n" + strings.Repeat("same\n", 20) + "tail!\n"
	lines, adds, dels, clipped := lineDiff([]byte(before), []byte(after))
	require.False(t, clipped)
	require.Equal(t, 3, adds)
	require.Equal(t, 2, dels)
	var kinds []string
	for _, l := range lines {
		kinds = append(kinds, l.Kind)
	}
	require.Contains(t, kinds, "gap", "distant hunks are separated")
	require.Contains(t, lines, diffLine{Kind: "add", Text: "- R3"})
	require.Contains(t, lines, diffLine{Kind: "del", Text: "- R2"})
	_, _, _, clipped = lineDiff([]byte(strings.Repeat("x\n", maxDiffLines+10)), nil)
	require.True(t, clipped)
	// The digest changes with any artifact's hash, and with the gate.
	a := []GateArtifact{{Name: "r.md", SHA256: "aa"}}
	require.NotEqual(t, GateDigest("g", a), GateDigest("g", []GateArtifact{{Name: "r.md", SHA256: "ab"}}))
	require.NotEqual(t, GateDigest("g", a), GateDigest("h", a))
	require.Equal(t, GateDigest("g", a), GateDigest("g", a))
}
