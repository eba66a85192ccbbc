package hooks

import (
	"reflect"
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
