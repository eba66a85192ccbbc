package ingress

import (
	"fmt"
	"strings"
)

// Commands lists every control command in the order the reference searches
// for them (docs/daemon.md §5.1). The set is closed: there is no "force" and no
// "review" (see the package documentation).
func Commands() []Command {
	return []Command{CmdStart, CmdStop, CmdPause, CmdResume, CmdExecute, CmdContribute, CmdCleanup, CmdDo}
}

// Command classes (docs/daemon.md §5.1).
var (
	spawnCommands    = map[Command]bool{CmdStart: true, CmdContribute: true, CmdDo: true}
	armingCommands   = map[Command]bool{CmdStart: true, CmdResume: true, CmdContribute: true, CmdDo: true}
	graphCommands    = map[Command]bool{CmdExecute: true}
	teardownCommands = map[Command]bool{CmdCleanup: true}
)

// Spawns reports whether c may spawn a session (start, contribute, do).
func (c Command) Spawns() bool { return spawnCommands[c] }

// Arms reports whether c counts as "start requested" when it is the last
// recorded command (start, resume, contribute, do).
func (c Command) Arms() bool { return armingCommands[c] }

// ForGraph reports whether c is a graph command: recorded, then handed to
// the gate rather than consumed by the daemon (execute).
func (c Command) ForGraph() bool { return graphCommands[c] }

// TearsDown reports whether c removes local resources (cleanup).
func (c Command) TearsDown() bool { return teardownCommands[c] }

// Valid reports whether c is one of Commands.
func (c Command) Valid() bool {
	for _, k := range Commands() {
		if k == c {
			return true
		}
	}
	return false
}

// ControlConfig is routing.control.
type ControlConfig struct {
	// Disabled turns keyword parsing off (routing.control.enabled: false):
	// every comment is plain input.
	Disabled bool
	// Keywords maps a command to its keyword (routing.control.keywords).
	// A missing command keeps its default; "" disables that command.
	Keywords map[Command]string
}

// DefaultControlConfig returns "the-loop <command>" for every command.
func DefaultControlConfig() ControlConfig {
	kw := make(map[Command]string, 8)
	for _, c := range Commands() {
		kw[c] = "the-loop " + string(c)
	}
	return ControlConfig{Keywords: kw}
}

// keywordTable is the compiled vocabulary: lower-cased keywords in search
// order.
type keywordTable struct {
	disabled bool
	cmds     []Command
	words    []string // lower-case, same index as cmds
}

// maxKeyword bounds a configured keyword.
const maxKeyword = 64

func newKeywordTable(cfg ControlConfig) (*keywordTable, error) {
	t := &keywordTable{disabled: cfg.Disabled}
	defaults := DefaultControlConfig().Keywords
	for c := range cfg.Keywords {
		if !c.Valid() {
			return nil, fmt.Errorf("routing.control.keywords.%s: not a control command (known: start, stop, pause, resume, execute, contribute, cleanup, do); force is never a keyword", clipText(string(c), 30))
		}
	}
	seen := map[string]Command{}
	for _, c := range Commands() {
		kw, ok := cfg.Keywords[c]
		if !ok {
			kw = defaults[c]
		}
		kw = strings.ToLower(strings.Join(strings.Fields(kw), " "))
		if kw == "" {
			continue // disabled
		}
		if len(kw) > maxKeyword || strings.HasPrefix(kw, "/") || strings.ContainsAny(kw, "`>") {
			return nil, fmt.Errorf("routing.control.keywords.%s: %q must be plain words of at most %d characters, without a leading / or markdown", c, clipText(kw, 40), maxKeyword)
		}
		if prev, dup := seen[kw]; dup {
			return nil, fmt.Errorf("routing.control.keywords.%s: %q is already the keyword of %s; each command needs its own", c, kw, prev)
		}
		seen[kw] = c
		t.cmds = append(t.cmds, c)
		t.words = append(t.words, kw)
	}
	return t, nil
}

// ParseControl returns the control command a comment body carries, or nil.
// It is the one parser both ingresses use; see the package documentation for
// the grammar. The result is always one of Commands (or Ambiguous), never
// text from the body. Actor and Note are left for the caller to fill.
func (t *keywordTable) parse(body string) *ControlCommand {
	if t == nil || t.disabled || len(t.cmds) == 0 {
		return nil
	}
	var found Command
	ambiguous := false
	fence := ""
	for len(body) > 0 {
		var line string
		if i := strings.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			line, body = body, ""
		}
		// Leading indentation: up to three spaces is ordinary text; four
		// (or a tab) is an indented code block.
		indent := 0
		for indent < len(line) && line[indent] == ' ' {
			indent++
		}
		if indent < len(line) && line[indent] == '\t' {
			indent = 4
		}
		trimmed := line[min(indent, len(line)):]
		if f := fenceOf(trimmed); f != "" && indent < 4 {
			switch {
			case fence == "":
				fence = f
			case strings.HasPrefix(f, fence[:1]) && len(f) >= len(fence) && strings.TrimSpace(strings.TrimLeft(trimmed, fence[:1])) == "":
				fence = ""
			}
			continue
		}
		if fence != "" || indent >= 4 {
			continue
		}
		c, ok := t.matchLine(trimmed)
		if !ok {
			continue
		}
		if found != "" && found != c {
			ambiguous = true
		}
		found = c
	}
	switch {
	case ambiguous:
		return &ControlCommand{Ambiguous: true}
	case found != "":
		return &ControlCommand{Command: found}
	}
	return nil
}

// fenceOf returns the fence a line opens or closes (``` or ~~~, three or
// more), or "".
func fenceOf(s string) string {
	if len(s) < 3 || (s[0] != '`' && s[0] != '~') {
		return ""
	}
	n := 0
	for n < len(s) && s[n] == s[0] {
		n++
	}
	if n < 3 {
		return ""
	}
	return s[:n]
}

// negations are the words that, right after a keyword, turn the line into
// talk about the command rather than the command.
var negations = map[string]bool{
	"not": true, "no": true, "never": true, "cancel": true, "later": true, "yet": true,
	"isn't": true, "isnt": true, "wasn't": true, "won't": true, "doesn't": true, "don't": true, "dont": true,
}

// matchLine matches one line (indentation removed) against the keywords.
func (t *keywordTable) matchLine(line string) (Command, bool) {
	s := strings.TrimPrefix(line, "/")
	if len(s) == 0 {
		return "", false
	}
	// Cheap reject: the first byte must start some keyword.
	for i, kw := range t.words {
		if len(s) < len(kw) || !strings.EqualFold(s[:len(kw)], kw) {
			continue
		}
		rest := s[len(kw):]
		if len(rest) > 0 {
			b := rest[0]
			if isWordByte(b) || b == '-' || b == '/' || b == '?' {
				continue // "the-loop startlater", "the-loop start?" (a question)
			}
			if b == ':' && len(rest) > 1 && rest[1] != ' ' && rest[1] != '\t' && rest[1] != '\r' {
				continue // "the-loop stop:now"; "the-loop contribute: goal" is fine
			}
		}
		rest = strings.TrimLeft(rest, " \t.,!;:\r")
		if rest != "" {
			word := rest
			if j := strings.IndexAny(word, " \t.,!;:?\r"); j >= 0 {
				word = word[:j]
			}
			if negations[strings.ToLower(word)] {
				continue
			}
			if strings.Contains(rest, "?") && !strings.ContainsAny(rest, "\n") && t.cmds[i] != CmdContribute && t.cmds[i] != CmdDo {
				// "the-loop stop, or should we wait?" asks; it does not command.
				continue
			}
		}
		return t.cmds[i], true
	}
	return "", false
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_'
}

// clipText shortens s on a byte budget for messages.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
