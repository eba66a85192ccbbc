package usage

import (
	"bufio"
	"encoding/json"
	"path/filepath"
	"sort"
)

// maxCandidates bounds the files Locate examines for one session.
const maxCandidates = 256

// Dirs are where a session's harness keeps its files, as the daemon
// reaches them (in a world of its own: the world's copy of the home).
type Dirs struct {
	// Home is the home directory (.codex and .gemini are below it).
	Home string
	// ClaudeConfig is Claude Code's config directory ("": Home/.claude).
	ClaudeConfig string
}

// Root is the directory harness's records must stay below (Tail's Home).
func (d Dirs) Root(harness string) string {
	if harness == HarnessClaude {
		if d.ClaudeConfig != "" {
			return d.ClaudeConfig
		}
		return filepath.Join(d.Home, ".claude")
	}
	return d.Home
}

// Locate returns the records of one session: Claude Code's transcript of
// conversation id sessionID (and its subagents'), Codex's session logs
// whose working directory is checkout, the Gemini CLI's chat records of
// sessionID. None found is not an error: a harness that has not answered
// yet has written nothing. Names come from globs below dirs.Root(harness);
// Tail.Read checks each file again when it opens it.
func Locate(harness string, dirs Dirs, checkout, sessionID string) []string {
	home := dirs.Root(harness)
	switch harness {
	case HarnessClaude:
		if sessionID == "" || !safeName(sessionID) {
			return nil
		}
		m, _ := filepath.Glob(filepath.Join(home, "projects", "*", sessionID+".jsonl"))
		sub, _ := filepath.Glob(filepath.Join(home, "projects", "*", sessionID, "subagents", "*.jsonl"))
		return bounded(append(m, sub...))
	case HarnessCodex:
		m, _ := filepath.Glob(filepath.Join(home, ".codex", "sessions", "*", "*", "*", "rollout-*.jsonl"))
		sort.Sort(sort.Reverse(sort.StringSlice(m))) // newest first: the names start with the time
		var out []string
		for _, p := range bounded(m) {
			var meta struct {
				Type    string `json:"type"`
				Payload struct {
					Cwd string `json:"cwd"`
				} `json:"payload"`
			}
			if firstLine(home, p, &meta) && meta.Type == "session_meta" && meta.Payload.Cwd == checkout {
				out = append(out, p)
			}
		}
		sort.Strings(out)
		return out
	case HarnessGemini:
		if len(sessionID) < 8 || !safeName(sessionID) {
			return nil
		}
		m, _ := filepath.Glob(filepath.Join(home, ".gemini", "tmp", "*", "chats", "session-*-"+sessionID[:8]+".jsonl"))
		var out []string
		for _, p := range bounded(m) {
			var head struct {
				SessionID string `json:"sessionId"`
			}
			if firstLine(home, p, &head) && head.SessionID == sessionID {
				out = append(out, p)
			}
		}
		return out
	}
	return nil
}

func bounded(m []string) []string {
	if len(m) > maxCandidates {
		return m[:maxCandidates]
	}
	return m
}

// safeName reports whether s can be put into a glob as a literal name.
func safeName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return s != "" && s[0] != '.'
}

// firstLine decodes path's first line (at most MaxLine bytes) into v.
func firstLine(home, path string, v any) bool {
	f, err := openInside(home, path)
	if err != nil {
		return false
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var line []byte
	for len(line) <= MaxLine {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return false
		}
		line = append(line, chunk...)
		if !isPrefix {
			return json.Unmarshal(line, v) == nil
		}
	}
	return false
}
