package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop"
)

// The docs state each default as the key catalogue does: a default the docs
// give from memory drifts (polling.intervalSeconds once read 60 in one place
// and 300 in another; the code's is 300).
func TestDocsStateTheCodesDefaults(t *testing.T) {
	defaults := map[string]string{}
	for _, k := range loop.CLIConfigKeys() {
		if k.Default != nil {
			defaults[k.Path] = fmt.Sprint(k.Default)
		}
	}
	// "`polling.intervalSeconds` (default 300" and "`polling.intervalSeconds` 300,"
	stated := regexp.MustCompile("`(polling\\.[A-Za-z.]+)` \\(?(?:default )?([0-9]+)\\b")
	for _, doc := range []string{"README.md", "docs/daemon.md", "docs/performance.md", "examples/systemd/README.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", doc))
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		for _, m := range stated.FindAllStringSubmatch(string(b), -1) {
			want, ok := defaults[m[1]]
			if !ok {
				continue
			}
			require.Equal(t, want, m[2], "%s states %s's default as %s; the code's is %s", doc, m[1], m[2], want)
		}
	}
}
