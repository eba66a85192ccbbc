package hooks

import (
	"fmt"
	"strings"

	"github.com/theloop-dev/theloop/graph"
)

// The skill's artifact templates (plugin/the-loop/skills/the-loop/templates)
// mark every place the agent must write with PlaceholderMarker (every
// other placeholder of theirs, such as issue-<n> or <trigger>, sits on a
// line it marks: plugin's TestTemplatePlaceholdersAreMarked). A template
// copied as it is has the
// right headings, so a section check alone passes it: validate-artifacts
// and lint-artifacts refuse an artifact that still holds a placeholder,
// naming the file, the line, the placeholder and the fix. Text in a fenced
// code block or an inline code span is quoted, not a placeholder (a
// design that documents the templates may show one).
const PlaceholderMarker = "TODO(the-loop)"

// maxPlaceholderFindings bounds the findings for one file: the first few
// say what to do; the count says how many more.
const maxPlaceholderFindings = 5

// placeholderFindings lists the template placeholders left in text (the
// whole file, front matter included, so that line numbers are the
// editor's).
func placeholderFindings(text, path string) []graph.Message {
	if !strings.Contains(text, PlaceholderMarker) {
		return nil
	}
	var out []graph.Message
	more := 0
	inFence := false // as the section parser reads fences (isFence)
	for i, line := range strings.Split(text, "\n") {
		if isFence(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		bare := withoutCodeSpans(line)
		at := strings.Index(bare, PlaceholderMarker)
		if at < 0 {
			continue
		}
		if len(out) == maxPlaceholderFindings {
			more++
			continue
		}
		found := clipRunes(strings.ToValidUTF8(strings.TrimSpace(bare[at:]), "\uFFFD"), 80)
		out = append(out, graph.Finding(fmt.Sprintf("line %d still holds the template's placeholder %q: replace it with your own words (the text after the marker says what belongs there; <…> and issue-<n> are yours to fill too), or delete the line if it does not apply", i+1, found), path))
	}
	if more > 0 {
		out = append(out, graph.Finding(fmt.Sprintf("and %d more lines with a template placeholder (search the file for %s)", more, PlaceholderMarker), path))
	}
	return out
}

// withoutCodeSpans is line with its inline code spans removed.
func withoutCodeSpans(line string) string {
	if !strings.Contains(line, "`") {
		return line
	}
	var b strings.Builder
	for {
		i := strings.Index(line, "`")
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:i])
		n := len(line[i:]) - len(strings.TrimLeft(line[i:], "`"))
		tick := line[i : i+n]
		rest := line[i+n:]
		j := strings.Index(rest, tick)
		if j < 0 {
			b.WriteString(line[i:]) // an unclosed run is text
			return b.String()
		}
		line = rest[j+n:]
	}
}

func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
