// Package shortdir gives tests directories short enough for unix sockets.
//
// A unix socket path is limited to about 104 bytes (108 on Linux, 104 on
// macOS). t.TempDir() lives under $TMPDIR and carries the test's name, so a
// long $TMPDIR — macOS gives every user one of ~50 characters — pushes a
// control socket or a tmux socket past the limit. Tests that bind a socket
// take their directory from here instead: a short random name directly under
// /tmp, removed when the test ends, whatever $TMPDIR says.
//
// This package is for tests only; nothing in a binary imports it.
package shortdir

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Base is where short directories are made: /tmp where it exists (Linux,
// macOS, the BSDs), else os.TempDir().
func Base() string {
	if runtime.GOOS != "windows" {
		if fi, err := os.Stat("/tmp"); err == nil && fi.IsDir() {
			return "/tmp"
		}
	}
	return os.TempDir()
}

// New makes a private (0700) directory with a short random name under Base
// and removes it, with everything in it, when the test and its subtests end.
// The path is at most len(Base())+12 bytes, leaving ~90 for what goes in it.
func New(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp(Base(), "tl")
	if err != nil {
		t.Fatalf("shortdir: %v", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatalf("shortdir: %v", err)
	}
	t.Cleanup(func() {
		endWorlds(dir)
		_ = os.RemoveAll(dir)
	})
	return dir
}

// endWorlds kills the agent sandboxes (bubblewrap) that mount anything of
// dir: a session's world outlives the loopd that started it by design, so a
// test's worlds would otherwise outlive the test. SIGKILL to a world's
// bubblewrap ends its PID namespace, everything in it.
func endWorlds(dir string) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if filepath.Base(args[0]) == "bwrap" && strings.Contains(string(b), dir+"/") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// Tmux returns the socket path of a private tmux server (for tmux -S) in a
// New directory. When the test ends the server is killed (every session on
// it, and the processes in their panes) and then the directory goes, so no
// server and no stale socket file outlives the test. The server itself starts
// with the first tmux command that names the path.
func Tmux(t testing.TB) string {
	t.Helper()
	sock := filepath.Join(New(t), "tmux")
	// Cleanups run last-in first-out: the kill runs before New's removal,
	// and before the removal of any TempDir the test made earlier — so it
	// waits for the panes' processes to exit: kill-server only hangs them
	// up, and a harness still writing into a test's directory makes that
	// directory's removal fail.
	t.Cleanup(func() {
		out, _ := exec.Command("tmux", "-S", sock, "list-panes", "-a", "-F", "#{pane_pid}").Output()
		_ = exec.Command("tmux", "-S", sock, "kill-server").Run()
		var pids []int
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				pids = append(pids, pid)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for _, pid := range pids {
			for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil {
				time.Sleep(10 * time.Millisecond)
			}
		}
	})
	return sock
}

// TmuxName is a fresh name for a tmux server selected by name (tmux -L
// prefix-…), for a test whose server must live where tmux keeps named
// servers' sockets ($TMUX_TMPDIR or /tmp, then tmux-<uid>/). When the test
// ends the server is killed and its socket file removed: tmux leaves the
// file behind when its server exits.
func TmuxName(t testing.TB, prefix string) string {
	t.Helper()
	name := prefix + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	dir := os.Getenv("TMUX_TMPDIR")
	if dir == "" {
		dir = "/tmp"
	}
	sock := filepath.Join(dir, "tmux-"+strconv.Itoa(os.Getuid()), name)
	t.Cleanup(func() {
		_ = exec.Command("tmux", "-L", name, "kill-server").Run()
		_ = os.Remove(sock)
	})
	return name
}
