package graphfile

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 9, item 1: a --graph file is bounded before the YAML parser (a 95 MB
// graph once took 79 s and 2.5 GB, then was refused for aliases it did not
// have).
func TestGraphFilesAreBoundedBeforeParsing(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"too large", "nodes:\n" + strings.Repeat("  # padding padding padding padding\n", MaxGraphBytes/30), "more than the 1048576 allowed"},
		{"nested", "nodes: " + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "\n", "nested [ or { levels"},
		{"dashes", "nodes:\n" + strings.Repeat("- ", 5000) + "x\n", "block levels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("g.yaml", []byte(tc.src))
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "alias")
		})
	}
}
