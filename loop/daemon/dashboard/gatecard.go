package dashboard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"html/template"
	"strings"

	"github.com/microcosm-cc/bluemonday"
	"github.com/pmezard/go-difflib/difflib"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/theloop-dev/theloop/graph"
)

// GateCards is a Source that can also show what a human gate decides on
// (optional: a Source without it gets a gate section without a card).
type GateCards interface {
	// GateCard returns the card of the gate the work item waits at, or
	// nil when it waits at none.
	GateCard(ctx context.Context, ref string) (*GateCard, error)
}

// GateCard is what a gate's decision is about: the artifacts it reviews as
// they stand, the same artifacts as they stood at the last decision on the
// gate, and what loopd's own evaluation says of the nodes that lead to it.
// Every byte of an artifact was written by the agent: the card renders it
// only through RenderMarkdown and html/template.
type GateCard struct {
	Gate      string
	Artifacts []GateArtifact
	Checks    []GateCheck
	// Previous is the last decision on this gate before this visit (nil:
	// none kept — the gate's first visit, or a decision older than the
	// snapshots).
	Previous *GateDecision
}

// GateDecision is an earlier decision on a gate.
type GateDecision struct {
	Outcome, By, At string
}

// GateArtifact is one artifact a gate reviews.
type GateArtifact struct {
	// Name is relative to the spec directory; Path to the checkout.
	Name, Path string
	// Content is the file's text, at most MaxGateArtifact bytes of it
	// (Truncated says there was more); SHA256 is of the bytes read.
	Content   []byte
	Truncated bool
	SHA256    string
	// Problem says why there is no content ("" when there is): missing, a
	// link (never followed), not a regular file, too large.
	Problem string
	// Before is the content at the Previous decision (BeforeKnown: it was
	// kept; BeforeSHA256 the hash recorded then).
	Before       []byte
	BeforeKnown  bool
	BeforeSHA256 string
}

// GateCheck is loopd's verdict on a node that leads to the gate: its
// status and its exit chain's hooks.
type GateCheck struct {
	Node     string
	Status   string
	Hooks    []string
	Messages []string
}

// MaxGateArtifact bounds what the card reads and renders of an artifact.
const MaxGateArtifact = 256 << 10

// maxDiffLines bounds each side of a diff the card computes.
const maxDiffLines = 4000

// GateArtifactNames returns the artifacts gate reviews, relative to the spec
// directory, in declaration order: those its exit chain locks
// (lock-artifacts' artifacts) or records feedback into (record-feedback's
// into); for a gate with neither (a final review), what the nodes with an
// edge into it produce or validate.
func GateArtifactNames(g *graph.Graph, gate string) []string {
	n, ok := g.Node(gate)
	if !ok {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	add := func(vs ...string) {
		for _, v := range vs {
			for _, a := range strings.Split(v, "|") {
				if a = strings.TrimSpace(a); a != "" && !seen[a] {
					seen[a] = true
					out = append(out, a)
				}
			}
		}
	}
	params := func(h graph.BoundHook, keys ...string) {
		for _, k := range keys {
			add(graph.AsStrings(h.Params[k])...)
		}
	}
	for _, h := range n.Exit {
		switch h.Name {
		case "lock-artifacts":
			params(h, "artifacts")
		case "record-feedback":
			params(h, "into")
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, p := range GatePredecessors(g, gate) {
		pn, _ := g.Node(p)
		add(pn.ProducedNames()...)
		for _, h := range pn.Exit {
			if h.Name == "validate-artifacts" {
				params(h, "validates")
			}
		}
	}
	return out
}

// GatePredecessors are the nodes with an edge into gate other than a
// changes-requested round trip (nodes the gate sends work back to).
func GatePredecessors(g *graph.Graph, gate string) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range g.Edges() {
		if e.To == gate && e.From != gate && !seen[e.From] {
			seen[e.From] = true
			out = append(out, e.From)
		}
	}
	return out
}

// GateDigest identifies what the operator was shown: the gate and each
// artifact's hash. The confirmation carries it back; a post whose digest
// no longer matches is refused (the gate moved on, or the agent changed
// the artifact after the operator read it).
func GateDigest(gate string, arts []GateArtifact) string {
	h := sha256.New()
	h.Write([]byte(gate))
	for _, a := range arts {
		h.Write([]byte{0})
		h.Write([]byte(a.Name))
		h.Write([]byte{0})
		h.Write([]byte(a.SHA256))
		h.Write([]byte(a.Problem))
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// markdown renders GitHub-flavoured markdown without raw HTML (goldmark
// leaves it out unless told otherwise), and markdownPolicy keeps of the
// result only inert elements: no script, no style, no event handler, no
// image (the CSP allows none from elsewhere, and a tracking pixel is a
// leak), links only to http(s) with rel=noopener noreferrer nofollow.
var (
	markdown       = goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.TaskList))
	markdownPolicy = newMarkdownPolicy()
)

func newMarkdownPolicy() *bluemonday.Policy {
	p := bluemonday.NewPolicy()
	p.AllowElements("p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "code",
		"em", "strong", "del", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td", "sup", "sub")
	p.AllowAttrs("href").OnElements("a")
	p.AllowURLSchemes("http", "https")
	p.AllowRelativeURLs(false)
	p.RequireParseableURLs(true)
	p.RequireNoFollowOnLinks(true)
	p.RequireNoReferrerOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	p.AllowAttrs("type", "checked", "disabled").Matching(bluemonday.SpaceSeparatedTokens).OnElements("input")
	p.AllowAttrs("align").Matching(bluemonday.CellAlign).OnElements("th", "td")
	return p
}

// RenderMarkdown renders untrusted markdown (at most MaxGateArtifact bytes
// are read) to sanitized HTML. A leading front-matter block is left out:
// the card shows it as text.
func RenderMarkdown(src []byte) template.HTML {
	if len(src) > MaxGateArtifact {
		src = src[:MaxGateArtifact]
	}
	_, body := splitFrontMatter(src)
	var buf bytes.Buffer
	if err := markdown.Convert(body, &buf); err != nil {
		return template.HTML(template.HTMLEscapeString(string(body)))
	}
	// The one template.HTML of the dashboard: bluemonday's output.
	return template.HTML(markdownPolicy.SanitizeBytes(buf.Bytes()))
}

// splitFrontMatter splits a leading "---" YAML block off src.
func splitFrontMatter(src []byte) (fm, body []byte) {
	rest, ok := bytes.CutPrefix(src, []byte("---\n"))
	if !ok {
		rest, ok = bytes.CutPrefix(src, []byte("---\r\n"))
	}
	if !ok {
		return nil, src
	}
	for i := 0; i < len(rest); {
		j := bytes.IndexByte(rest[i:], '\n')
		line := rest[i:]
		if j >= 0 {
			line = rest[i : i+j]
		}
		if t := bytes.TrimRight(line, "\r"); bytes.Equal(t, []byte("---")) || bytes.Equal(t, []byte("...")) {
			if j < 0 {
				return rest[:i], nil
			}
			return rest[:i], rest[i+j+1:]
		}
		if j < 0 {
			break
		}
		i += j + 1
	}
	return nil, src
}

// diffLine is one line of an artifact's diff: Kind is add, del, ctx or
// gap (an elided stretch).
type diffLine struct {
	Kind, Text string
}

// lineDiff is a unified diff of before → after, three lines of context,
// each side bounded to maxDiffLines lines (the rest is said to be elided).
func lineDiff(before, after []byte) (lines []diffLine, adds, dels int, clipped bool) {
	a, ca := splitLines(before)
	b, cb := splitLines(after)
	m := difflib.NewMatcher(a, b)
	for gi, group := range m.GetGroupedOpCodes(3) {
		if gi > 0 {
			lines = append(lines, diffLine{Kind: "gap", Text: "…"})
		}
		for _, op := range group {
			switch op.Tag {
			case 'e':
				for _, l := range a[op.I1:op.I2] {
					lines = append(lines, diffLine{Kind: "ctx", Text: l})
				}
			case 'd', 'r', 'i':
				for _, l := range a[op.I1:op.I2] {
					lines = append(lines, diffLine{Kind: "del", Text: l})
					dels++
				}
				for _, l := range b[op.J1:op.J2] {
					lines = append(lines, diffLine{Kind: "add", Text: l})
					adds++
				}
			}
		}
	}
	return lines, adds, dels, ca || cb
}

func splitLines(b []byte) ([]string, bool) {
	s := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(b) == 0 {
		s = nil
	}
	if len(s) > maxDiffLines {
		return s[:maxDiffLines], true
	}
	return s, false
}

// gateCardView is the card as the item page shows it.
type gateCardView struct {
	Gate      string
	Artifacts []artifactView
	Checks    []GateCheck
	// CI are the pull requests' checks by verdict.
	CIPassing, CIFailing, CIPending []string
	Previous                        *GateDecision
	Digest                          string
}

type artifactView struct {
	Name, Path, Problem, SHA256 string
	FrontMatter                 string
	HTML                        template.HTML
	Truncated                   bool
	// Diff is against the Previous decision's content (DiffKnown: it was
	// kept; Same: nothing changed).
	DiffKnown, Same, DiffClipped bool
	Diff                         []diffLine
	Adds, Dels                   int
}

func cardView(c *GateCard, prs []PullRequest) *gateCardView {
	v := &gateCardView{Gate: c.Gate, Checks: c.Checks, Previous: c.Previous, Digest: GateDigest(c.Gate, c.Artifacts)}
	for _, a := range c.Artifacts {
		av := artifactView{Name: a.Name, Path: a.Path, Problem: a.Problem, Truncated: a.Truncated, SHA256: clip(a.SHA256, 12)}
		if a.Problem == "" {
			fm, _ := splitFrontMatter(a.Content)
			av.FrontMatter = strings.TrimSpace(string(fm))
			av.HTML = RenderMarkdown(a.Content)
		}
		if c.Previous != nil && a.BeforeKnown {
			av.DiffKnown = true
			av.Same = a.BeforeSHA256 == a.SHA256
			if !av.Same {
				av.Diff, av.Adds, av.Dels, av.DiffClipped = lineDiff(a.Before, a.Content)
			}
		}
		v.Artifacts = append(v.Artifacts, av)
	}
	for _, p := range prs {
		for _, ch := range p.Checks {
			switch ch.Verdict {
			case "passing":
				v.CIPassing = append(v.CIPassing, ch.Name)
			case "failing":
				v.CIFailing = append(v.CIFailing, ch.Name)
			default:
				v.CIPending = append(v.CIPending, ch.Name)
			}
		}
	}
	return v
}
