package hooks

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// CheckSimpleFrontMatterAgrees fails t when the fast front-matter reader
// answers differently from the general YAML parser.
func CheckSimpleFrontMatterAgrees(t *testing.T, block string) {
	fast, ok := simpleFrontMatter(block)
	if !ok {
		return
	}
	var full any
	if err := yaml.Unmarshal([]byte(block), &full); err != nil {
		t.Fatalf("fast path accepted %q, the YAML parser refuses it: %v", block, err)
	}
	if len(fast) == 0 {
		if full != nil {
			if m, isMap := full.(map[string]any); !isMap || len(m) != 0 {
				t.Fatalf("fast path read %q as empty, the YAML parser as %#v", block, full)
			}
		}
		return
	}
	if !reflect.DeepEqual(any(fast), full) {
		t.Fatalf("fast path read %q as %#v, the YAML parser as %#v", block, fast, full)
	}
}

// LintMermaid exposes the mermaid lint to the package's black-box tests.
func LintMermaid(text string) []string { return lintMermaid(text) }

// CheckToLowerAgrees fails t when the document's lower-casing differs from
// strings.ToLower.
func CheckToLowerAgrees(t *testing.T, s string) {
	if got, want := toLower(s), strings.ToLower(s); got != want {
		t.Fatalf("toLower(%q) = %q, strings.ToLower gives %q", s, got, want)
	}
}

// CheckDocumentSections fails t when a parsed document's sections differ
// from Sections over the same body (the split-and-join reading).
func CheckDocumentSections(t *testing.T, text string) {
	d := newDocument(text)
	want := Sections(d.body)
	if len(want) != len(d.spans) {
		t.Fatalf("%q: %d spans, Sections finds %d", text, len(d.spans), len(want))
	}
	for _, w := range want {
		got, ok := d.section(w.Title)
		first, _ := FindSection(d.body, w.Title)
		if !ok || got != first {
			t.Fatalf("%q: section %q = %#v, FindSection gives %#v", text, w.Title, got, first)
		}
	}
	// The untrimmed content too (checkmarks count in it): the lines of the
	// split reading, joined.
	lines := strings.Split(d.body, "\n")
	for i, ls := range spans(lines) {
		sp := d.spans[i]
		if sp.title != ls.title || sp.level != ls.level || d.body[sp.start:sp.end] != strings.Join(lines[ls.start:ls.end], "\n") {
			t.Fatalf("%q: span %d = %q level %d %q, the split reading gives %q level %d %q", text, i, sp.title, sp.level, d.body[sp.start:sp.end], ls.title, ls.level, strings.Join(lines[ls.start:ls.end], "\n"))
		}
	}
}

// CheckLintAgrees fails t when the mermaid or structure lint differs from
// its split-every-line reading.
func CheckLintAgrees(t *testing.T, text string) {
	if got, want := lintMermaid(text), lintMermaidSplit(text); !reflect.DeepEqual(got, want) {
		t.Fatalf("lintMermaid(%q) = %q, the split reading gives %q", text, got, want)
	}
	if got, want := lintStructure(text), lintStructureSplit(text); !reflect.DeepEqual(got, want) {
		t.Fatalf("lintStructure(%q) = %q, the split reading gives %q", text, got, want)
	}
}

// lintMermaidSplit is the split-every-line reading lintMermaid must equal: it parses every closed mermaid block (mermaid.go: flowchart and
// sequence diagrams statement by statement, other types by keyword) and
// reports each problem with the block's number and the line within it.
func lintMermaidSplit(text string) []string {
	lines := strings.Split(text, "\n")
	var out []string
	idx := 0
	for i := 0; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(t, "```mermaid") {
			continue
		}
		end := -1
		for j := i + 1; j < len(lines); j++ {
			if strings.HasPrefix(strings.TrimSpace(lines[j]), "```") {
				end = j
				break
			}
		}
		if end < 0 {
			break // an unclosed block is not a diagram
		}
		idx++
		block := lines[i+1 : end]
		out = append(out, mermaidFindings(idx, block)...)
		i = end
	}
	return out
}

// lintStructureSplit is the split-every-line reading lintStructure must equal: the built-in markdown structure lint: problems that
// break how the document renders for its reviewer.
func lintStructureSplit(text string) []string {
	var out []string
	open := -1
	for i, l := range strings.Split(text, "\n") {
		if isFence(l) {
			if open < 0 {
				open = i + 1
			} else {
				open = -1
			}
		}
	}
	if open > 0 {
		out = append(out, fmt.Sprintf("line %d opens a code fence that is never closed — everything after it renders as code", open))
	}
	return out
}

// CheckContainsLowerAgrees fails t when a document's containsLower differs
// from strings.Contains over its lowered body.
func CheckContainsLowerAgrees(t *testing.T, body, marker string) {
	d := newDocument(body)
	needle := strings.ToLower(marker)
	if got, want := d.containsLower(needle), strings.Contains(strings.ToLower(d.body), needle); got != want {
		t.Fatalf("containsLower(%q, %q) = %v, strings.Contains over the lowered body gives %v", d.body, needle, got, want)
	}
}
