package hooks

import (
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
	for i, l := range strings.Split(d.body, "\n") {
		if d.line(i) != l {
			t.Fatalf("%q: line %d = %q, split gives %q", text, i, d.line(i), l)
		}
	}
}
