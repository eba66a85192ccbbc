package graphfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/xeipuuv/gojsonschema"
)

// TestEmbeddedSchemaUsesOnlyKnownKeywords: the validator refuses a schema
// with a keyword it does not enforce, so a rule added to graph.schema.json
// that it cannot check fails here instead of being silently ignored.
func TestEmbeddedSchemaUsesOnlyKnownKeywords(t *testing.T) {
	if _, err := compiledSchema(); err != nil {
		t.Fatalf("graph.schema.json: %v", err)
	}
	root, err := validationSchema()
	if err != nil {
		t.Fatal(err)
	}
	root["anyOf"] = []any{map[string]any{"type": "object"}}
	if _, err := compileSchema(root); err == nil || !strings.Contains(err.Error(), `keyword "anyOf" is not supported`) {
		t.Fatalf("an unsupported keyword was accepted: %v", err)
	}
}

// verdicts returns whether doc (YAML) is valid by this package's validator
// and by gojsonschema, a general draft-07 implementation (test-only: it is
// what graph files were validated with before).
func verdicts(t *testing.T, doc []byte) (ours, reference bool, ok bool) {
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return false, false, false
	}
	v, err := jsonShaped(v)
	if err != nil {
		return false, false, false
	}
	s, err := compiledSchema()
	if err != nil {
		t.Fatal(err)
	}
	var found []violation
	s.validate(v, "", &found)
	root, err := validationSchema()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := gojsonschema.NewSchema(gojsonschema.NewGoLoader(root))
	if err != nil {
		t.Fatal(err)
	}
	res, err := ref.Validate(gojsonschema.NewGoLoader(v))
	if err != nil {
		return false, false, false // values JSON cannot carry (NaN, …)
	}
	return len(found) == 0, res.Valid(), true
}

var differentialSeeds = []string{
	"nodes:\n  - id: a\n",
	"name: x\nnodes: []\n",
	"nodes:\n  - phase: p\n",
	"nodes:\n  - id: '  '\n",
	"nodes:\n  - id: a\n    actor: robot\n",
	"nodes:\n  - id: a\n    exit: [[ok]]\n",
	"nodes:\n  - id: a\n    exit: [{hook: ok, whith: {}}]\n",
	"nodes:\n  - id: a\n    exit: [{hook: ok, timeout: soon}]\n",
	"nodes:\n  - id: a\n    exit: [{hook: ok, with: {x: 1}, blocking: false}]\n",
	"nodes:\n  - id: a\nedges:\n  - {from: a, to: a}\n",
	"skipSets:\n  s: a\nnodes:\n  - id: a\n",
	"skipSets:\n  s: [a]\nnodes:\n  - id: a\n    skippable: true\n",
	"nodez: []\nnodes:\n  - id: a\n",
	"nodes:\n  - id: a\n    maxAttempts: many\n",
	"nodes:\n  - id: a\n    maxAttempts: 0\n",
	"nodes:\n  - id: a\n    maxAttempts: 2.5\n",
	"nodes:\n  - id: a\n    produces: [a.md, 3]\n",
	"nodes:\n  - id: a\n    produces: a.md\n",
	"nodes:\n  - id: a\n    entry: ~\n",
	"nodes: {}\n",
	"[]\n",
	"\"x\"\n",
}

// TestValidatorAgreesWithAGeneralImplementation: on the shipped graphs, on
// every rule the compile tests exercise, and on mutations of them, this
// package's validator accepts exactly what gojsonschema accepts.
func TestValidatorAgreesWithAGeneralImplementation(t *testing.T) {
	docs := append([]string(nil), differentialSeeds...)
	shipped, _ := filepath.Glob("../../loop/graphs/*.yaml")
	if len(shipped) == 0 {
		t.Fatal("no shipped graphs found under loop/graphs")
	}
	for _, p := range shipped {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	for _, d := range docs {
		ours, ref, ok := verdicts(t, []byte(d))
		if ok && ours != ref {
			t.Errorf("verdicts differ (ours valid=%v, gojsonschema valid=%v) on:\n%s", ours, ref, d)
		}
	}
}

// FuzzValidatorAgrees: for any YAML document, both validators agree on
// whether it is a valid graph file, and ours never panics.
func FuzzValidatorAgrees(f *testing.F) {
	for _, s := range differentialSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		if len(doc) > 4096 {
			return
		}
		ours, ref, ok := verdicts(t, []byte(doc))
		if ok && ours != ref {
			t.Fatalf("verdicts differ (ours valid=%v, gojsonschema valid=%v) on:\n%s", ours, ref, doc)
		}
	})
}
