package jq

import (
	"bytes"
	"strings"
	"testing"
)

func eval(t *testing.T, doc, expr string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := Evaluate([]byte(doc), &out, expr)
	return out.String(), err
}

func TestScalarsPrintRawAndTheRestAsJSON(t *testing.T) {
	doc := `{"items":[{"ref":"issue-1","node":"design","blocked":true,"n":2,"f":1.5,"tags":["a"],"x":null}]}`
	cases := map[string]string{
		`.items[].ref`:               "issue-1\n",
		`.items[].blocked`:           "true\n",
		`.items[].n`:                 "2\n",
		`.items[].f`:                 "1.50\n",
		`.items[].x`:                 "\n",
		`.items[].tags`:              "[\"a\"]\n",
		`.items[0] | {ref}`:          "{\"ref\":\"issue-1\"}\n",
		`.items | length`:            "1\n",
		`[.items[].ref] | join(",")`: "issue-1\n",
	}
	for expr, want := range cases {
		got, err := eval(t, doc, expr)
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		if got != want {
			t.Errorf("%s = %q, want %q", expr, got, want)
		}
	}
}

func TestParseErrorPointsAtTheColumn(t *testing.T) {
	_, err := eval(t, `{}`, ".a |\n .b[")
	if err == nil {
		t.Fatal("a broken expression was accepted")
	}
	msg := err.Error()
	if !strings.Contains(msg, "failed to parse jq expression (line 2, column") || !strings.Contains(msg, "^") {
		t.Fatalf("error does not locate the fault: %q", msg)
	}
}

func TestRuntimeErrorAndHalt(t *testing.T) {
	if _, err := eval(t, `{"a":"x"}`, `.a + 1`); err == nil || !strings.Contains(err.Error(), "cannot add") {
		t.Fatalf("string + number: err = %v", err)
	}
	got, err := eval(t, `[1,2,3]`, `.[] | if . == 2 then halt else . end`)
	if err != nil || got != "1\n" {
		t.Fatalf("halt: got %q, %v", got, err)
	}
	if _, err := eval(t, `{`, `.`); err == nil {
		t.Fatal("a malformed document was accepted")
	}
}

func TestEnvReadsTheCallersEnvironment(t *testing.T) {
	t.Setenv("THELOOP_JQ_TEST", "from-env")
	got, err := eval(t, `null`, `$ENV.THELOOP_JQ_TEST`)
	if err != nil || got != "from-env\n" {
		t.Fatalf("$ENV: got %q, %v", got, err)
	}
}

// FuzzEvaluate: any expression over any document either evaluates or
// errors; nothing panics (the expression comes from a user's command line
// and the document from loopd or a file).
func FuzzEvaluate(f *testing.F) {
	f.Add(`{"a":[1,2]}`, `.a[]`)
	f.Add(`[]`, `.[] | select(.x) | {y: .z}`)
	f.Add(`"s"`, `@base64d`)
	f.Add(`{}`, `def f: f; 1`)
	f.Fuzz(func(t *testing.T, doc, expr string) {
		if len(doc) > 4096 || len(expr) > 256 || strings.Contains(expr, "range") || strings.Contains(expr, "repeat") ||
			strings.Contains(expr, "recurse") || strings.Contains(expr, "while") || strings.Contains(expr, "until") ||
			strings.Contains(expr, "limit") || strings.Contains(expr, "def") || strings.Contains(expr, "input") {
			return // unbounded generators are jq's semantics, not a parser fault
		}
		var out bytes.Buffer
		_ = Evaluate([]byte(doc), &limited{&out, 1 << 16}, expr)
	})
}

// limited stops a runaway expression's output.
type limited struct {
	w *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if l.w.Len()+len(p) > l.n {
		return 0, errFull
	}
	return l.w.Write(p)
}

var errFull = &fullError{}

type fullError struct{}

func (*fullError) Error() string { return "output limit" }
