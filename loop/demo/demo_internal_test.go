package demo

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A newcomer with a long $TMPDIR (macOS) still gets a demo whose control
// socket fits the unix limit.
func TestDemoBaseKeepsTheSocketPathShort(t *testing.T) {
	t.Setenv("TMPDIR", "/tmp/"+strings.Repeat("x", 80))
	require.Equal(t, "/tmp", demoBase(""))
	t.Setenv("TMPDIR", "/tmp/short")
	require.Equal(t, "/tmp/short", demoBase(""))
	require.Equal(t, "/given", demoBase("/given"), "an explicit directory is the caller's choice")
}
