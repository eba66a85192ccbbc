package loop

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The fast path reads exactly what the whole-file parse reads, for every
// file that is valid YAML. (A syntax error inside a block theloop does not
// read goes unnoticed by the fast path; the whole-file parse would discard
// every setting for it.)
func checkHarnessFastPath(t *testing.T, data []byte) {
	if _, err := decodeYAMLMap("h.yaml", data); err != nil {
		return
	}
	full, fw, ferr := parseHarnessConfig("h.yaml", data, false)
	fast, qw, qerr := parseHarnessConfig("h.yaml", data, true)
	if (ferr == nil) != (qerr == nil) {
		t.Fatalf("errors differ: full %v, fast %v", ferr, qerr)
	}
	full.Raw, fast.Raw = nil, nil
	if !reflect.DeepEqual(full, fast) {
		t.Fatalf("configs differ for %q:\nfull %#v\nfast %#v", data, full, fast)
	}
	if !reflect.DeepEqual(fw, qw) && !(len(fw) == 0 && len(qw) == 0) {
		// Warnings about unparseable files may differ only when the fast
		// path fell back, which yields the full parser's own text.
		t.Fatalf("warnings differ for %q:\nfull %q\nfast %q", data, fw, qw)
	}
}

func TestHarnessConfigFastPathOnTheLoopsOwnConfig(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "shared", "conformance", "the-loop-v11", "repo", ".the-loop", "harness-config.yaml"))
	if err != nil {
		t.Skip("conformance data not present")
	}
	part, ok := topLevelBlocks(data, harnessKeys)
	if !ok || len(part) > len(data)/3 {
		t.Fatalf("the fast path should cut the-loop's config to a fraction (ok=%v, %d of %d bytes)", ok, len(part), len(data))
	}
	checkHarnessFastPath(t, data)
}

func FuzzHarnessConfigFastPath(f *testing.F) {
	for _, s := range []string{
		"workflow:\n  specDir: docs/specs\nother: &a {x: 1}\nticketing:\n  github: {owner: o, repo: r}\n",
		"workflow: &w\n  specDir: x\nnotifications:\n  events:\n    e: [a]\nz: *w\n",
		"other: &o {specDir: q}\nworkflow: *o\n",
		"---\nworkflow:\n  phaseLabelPrefix: 'l:'\n...\n",
		"{workflow: {specDir: a}}\n",
		"workflow:\n  specDir: |\n    multi\nx: y\n",
		"? workflow\n: {specDir: a}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkHarnessFastPath(t, data)
	})
}
