package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/theloop-dev/theloop/harness"
)

// CaptureScreen returns what the session's active pane shows now — the
// visible screen only, no scrollback — with its colours and attributes as
// SGR escape sequences (tmux capture-pane -e -p). It is the live view's
// frame: cheap (one tmux call, one screenful) and read-only (it never
// sends a key).
func (t *Tmux) CaptureScreen(ctx context.Context, name string) (string, error) {
	if !IsLoopSessionName(name) {
		return "", fmt.Errorf("%w: %q", ErrNotLoopSession, name)
	}
	res, err := t.run(ctx, t.cfg.ProbeTimeout, "capture-pane", "-e", "-p", "-t", paneTarget(name))
	if err != nil {
		if saysAbsent(err) {
			return "", fmt.Errorf("%w: tmux session %s is absent", ErrSessionMissing, name)
		}
		return "", fmt.Errorf("capturing tmux session %s: %w", name, err)
	}
	return string(res.Stdout), nil
}

// MaxTranscriptBytes bounds how much of a harness's own transcript file
// HarnessTranscript returns: its tail, the newest part of the
// conversation.
const MaxTranscriptBytes = 1 << 20

// ErrNoTranscript: the harness keeps no transcript file loopd knows of, or
// the file is not there (yet).
var ErrNoTranscript = errors.New("no harness transcript")

// ClaudeTranscriptPath is where Claude Code keeps the conversation of
// session id run in cwd: <config dir>/projects/<cwd with every character
// other than a letter or digit replaced by "-">/<id>.jsonl.
func ClaudeTranscriptPath(configDir, cwd, id string) string {
	slug := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, cwd)
	return filepath.Join(configDir, "projects", slug, id+".jsonl")
}

// HarnessTranscript returns the path and the tail (at most
// MaxTranscriptBytes) of the harness's own transcript of rec's
// conversation, where the harness keeps one (Claude Code does, under
// claudeConfigDir). The file is the agent's own writing: the caller shows
// it as data, never as instructions. The file is read beneath
// claudeConfigDir (os.Root): a symbolic link the agent planted there —
// the file, or a directory on the way — never takes the read outside it,
// to loopd's own files; and the file itself must not be a link.
func HarnessTranscript(rec Record, claudeConfigDir string) (path string, tail []byte, truncated bool, err error) {
	if d := harness.ByName(rec.Harness); d == nil || !d.TranscriptInConfigDir || claudeConfigDir == "" || rec.SessionID == "" || rec.Cwd == "" {
		return "", nil, false, fmt.Errorf("%w: harness %q keeps none loopd can read", ErrNoTranscript, rec.Harness)
	}
	if strings.ContainsAny(rec.SessionID, "/\\") || rec.SessionID == ".." {
		return "", nil, false, fmt.Errorf("%w: session id %q is not a file name", ErrNoTranscript, rec.SessionID)
	}
	path = ClaudeTranscriptPath(claudeConfigDir, rec.Cwd, rec.SessionID)
	rel, err := filepath.Rel(claudeConfigDir, path)
	if err != nil {
		return path, nil, false, fmt.Errorf("%w: %v", ErrNoTranscript, err)
	}
	root, err := os.OpenRoot(claudeConfigDir)
	if err != nil {
		return path, nil, false, fmt.Errorf("%w: %v", ErrNoTranscript, err)
	}
	defer root.Close()
	fi, err := root.Lstat(rel)
	if err != nil {
		return path, nil, false, fmt.Errorf("%w: %v", ErrNoTranscript, err)
	}
	if !fi.Mode().IsRegular() {
		return path, nil, false, fmt.Errorf("%w: %s is not a regular file", ErrNoTranscript, path)
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return path, nil, false, fmt.Errorf("%w: %v", ErrNoTranscript, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return path, nil, false, fmt.Errorf("%w: %s is not a regular file", ErrNoTranscript, path)
	}
	size := fi.Size()
	if size > MaxTranscriptBytes {
		if _, err := f.Seek(size-MaxTranscriptBytes, io.SeekStart); err != nil {
			return path, nil, false, err
		}
		truncated = true
	}
	tail, err = io.ReadAll(io.LimitReader(f, MaxTranscriptBytes))
	if truncated {
		// Start at a whole line: the first may be cut.
		if i := strings.IndexByte(string(tail), '\n'); i >= 0 {
			tail = tail[i+1:]
		}
	}
	return path, tail, truncated, err
}
