package demo

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/shortdir"
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

// A walk that failed after its tmux server died still leaves no socket
// file behind.
func TestCloseRemovesADeadServersSocket(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	base := shortdir.New(t)
	t.Setenv("TMUX_TMPDIR", base)
	dir := filepath.Join(base, fmt.Sprintf("tmux-%d", os.Getuid()))
	require.NoError(t, os.MkdirAll(dir, 0o700))
	name := "theloop-demo-dead"
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, name), Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	require.NoError(t, ln.Close()) // a socket file with no server: what a killed tmux leaves
	w := &world{socket: name, opts: Options{Path: os.Getenv("PATH")}}
	require.NoError(t, w.close())
	require.NoFileExists(t, filepath.Join(dir, name))
}
