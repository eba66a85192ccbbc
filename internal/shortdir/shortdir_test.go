package shortdir

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A socket binds in a New directory however long $TMPDIR is, and the
// directory is gone after the test.
func TestNewIsShortAndRemoved(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("x", 70))
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", long)

	var dir string
	t.Run("bind", func(t *testing.T) {
		dir = New(t)
		if len(dir) > len(Base())+16 {
			t.Fatalf("%s is %d bytes, want at most %d", dir, len(dir), len(Base())+16)
		}
		ln, err := net.Listen("unix", filepath.Join(dir, strings.Repeat("s", 60)+".sock"))
		if err != nil {
			t.Fatalf("bind in %s: %v", dir, err)
		}
		ln.Close()
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s outlived its test: %v", dir, err)
	}
}

// The tmux server behind Tmux is killed and its socket removed when the
// test ends.
func TestTmuxServerDoesNotOutliveTheTest(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed")
	}
	var sock string
	t.Run("serve", func(t *testing.T) {
		sock = Tmux(t)
		if out, err := exec.Command("tmux", "-S", sock, "new-session", "-d", "-s", "x", "sleep", "600").CombinedOutput(); err != nil {
			t.Fatalf("tmux new-session: %v: %s", err, out)
		}
	})
	if err := exec.Command("tmux", "-S", sock, "has-session").Run(); err == nil {
		t.Fatal("the tmux server outlived its test")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket %s outlived its test: %v", sock, err)
	}
}
