package yamlguard

import (
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		want error
	}{
		{"config", "workflow:\n  specDir: docs/specs\n  phases: [a, b, {c: [d]}]\n# [[[[ comment\n", nil},
		{"quoted brackets", "title: \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"\nx: '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[['\n", nil},
		{"flow", strings.Repeat("[", 65) + strings.Repeat("]", 65), ErrTooDeep},
		{"flow in a key", "a: " + strings.Repeat("{b: ", 70) + "c" + strings.Repeat("}", 70), ErrTooDeep},
		{"flow 64", strings.Repeat("[", 64) + strings.Repeat("]", 64), nil},
		{"block dashes", strings.Repeat("- ", 70) + "x\n", ErrTooDeep},
		{"indent", "a:\n" + strings.Repeat(" ", 300) + "b: c\n", ErrTooDeep},
		{"size", strings.Repeat("a", Default.MaxBytes+1), ErrTooLarge},
		{"block scalar text", "description: |\n  " + strings.Repeat("[", 100) + "\n  more text {{{{\nnext: [a]\n", nil},
		{"folded with chomping", "- >-\n   " + strings.Repeat("{", 100) + "\n- x\n", nil},
		{"after a block scalar", "a: |\n  text\nb: " + strings.Repeat("[", 65) + "\n", ErrTooDeep},
		{"a pipe inside a flow", "a: [b, c|\n" + strings.Repeat("[", 70) + "\n", ErrTooDeep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.doc), Default)
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want)
			}
		})
	}
}

// FuzzCheck: Check never panics, and whatever it accepts the YAML library
// parses without trouble (the budget here is the test's time).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"a: [b, {c: d}]\n", "- - - x\n", "x: \"[\\\"]\"\n", "'it''s': [1]\n", strings.Repeat("[", 70)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if Check(data, Limits{MaxBytes: 4096, MaxDepth: 64, MaxIndent: 256}) != nil {
			return
		}
		defer func() { _ = recover() }() // the library's own panics are its callers' to recover
		var v any
		_ = yaml.Unmarshal(data, &v)
	})
}
