package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// LauncherArg is the first argument that turns loopd's executable (or a
// test binary that calls MaybeRunLauncher first) into the sandbox
// launcher. It is also the mark InSandbox looks for in a process's
// ancestors' command lines.
const LauncherArg = "__loop-sandbox-exec"

// maxAncestry bounds the walk up the process tree (a cycle cannot occur
// on Linux, but a bound costs nothing).
const maxAncestry = 256

// InSandbox reports whether pid, or any of its ancestors, is a sandbox
// launcher: a process whose second command-line word is LauncherArg.
// procRoot is normally "/proc". An unreadable process is an error; callers
// deciding access treat an error as "in the sandbox" (fail closed).
func InSandbox(procRoot string, pid int) (bool, error) {
	for i := 0; pid > 1 && i < maxAncestry; i++ {
		cmd, err := os.ReadFile(fmt.Sprintf("%s/%d/cmdline", procRoot, pid))
		if err != nil {
			return false, fmt.Errorf("sandbox: reading process %d: %w", pid, err)
		}
		if args := bytes.Split(cmd, []byte{0}); len(args) > 1 && string(args[1]) == LauncherArg {
			return true, nil
		}
		ppid, err := parentPID(procRoot, pid)
		if err != nil {
			return false, err
		}
		pid = ppid
	}
	return false, nil
}

// parentPID reads the 4th field of /proc/<pid>/stat. The 2nd field (comm)
// is in parentheses and may hold spaces or parentheses itself, so the
// fields are counted after the last ')'.
func parentPID(procRoot string, pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", procRoot, pid))
	if err != nil {
		return 0, fmt.Errorf("sandbox: reading process %d: %w", pid, err)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("sandbox: process %d: unreadable stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, fmt.Errorf("sandbox: process %d: unreadable stat", pid)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, fmt.Errorf("sandbox: process %d: unreadable parent %q", pid, f[1])
	}
	return ppid, nil
}
