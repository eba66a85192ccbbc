package hooks

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
)

// FrontMatter splits a markdown document into its YAML front matter and
// body. Front matter exists only when the text starts with "---"; it ends at
// the next line whose trimmed text is "---". An unterminated block, a YAML
// error or a non-mapping yields an empty map; on a YAML error the whole text
// is the body (the-loop's reading, which conformance depends on).
func FrontMatter(text string) (map[string]any, string) {
	if !strings.HasPrefix(text, "---") {
		return map[string]any{}, text
	}
	first := strings.IndexByte(text, '\n')
	if first < 0 {
		return map[string]any{}, text
	}
	rest := text[first+1:]
	off := 0
	for off <= len(rest) {
		end := strings.IndexByte(rest[off:], '\n')
		line := rest[off:]
		next := len(rest) + 1
		if end >= 0 {
			line = rest[off : off+end]
			next = off + end + 1
		}
		if strings.TrimSpace(line) == "---" {
			block := rest[:off]
			body := ""
			if next <= len(rest) {
				body = rest[next:]
			}
			m, ok := parseYAMLMapping(block)
			if !ok {
				return map[string]any{}, text
			}
			return m, body
		}
		if end < 0 {
			break
		}
		off = next
	}
	return map[string]any{}, text
}

// parseYAMLMapping parses a front-matter block, reporting false when it is
// not valid YAML. A block that is valid but not a mapping yields ({}, true).
func parseYAMLMapping(block string) (m map[string]any, ok bool) {
	defer func() {
		if recover() != nil {
			m, ok = nil, false
		}
	}()
	if strings.TrimSpace(block) == "" {
		return map[string]any{}, true
	}
	var v any
	if err := yaml.Unmarshal([]byte(block), &v); err != nil {
		return nil, false
	}
	mm, isMap := v.(map[string]any)
	if !isMap {
		return map[string]any{}, true
	}
	return mm, true
}

// fmString renders a front-matter value the way it reads in YAML: strings
// as is, other scalars through fmt ("" for a missing value).
func fmString(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case bool:
		if t {
			return "True"
		}
		return "False"
	default:
		return fmt.Sprint(t)
	}
}

// Section is one heading and the text under it.
type Section struct {
	Title   string
	Level   int
	Content string
}

// isFence reports whether line opens or closes a fenced code block.
func isFence(line string) bool {
	return strings.HasPrefix(strings.TrimLeft(line, " \t"), "```")
}

// headingLevel returns the number of leading '#' of a heading line (at
// column 0), or 0 when the line is not a heading.
func headingLevel(line string) int {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	return n
}

// Sections lists the document's sections in order. A heading is a line that
// starts with '#' at column 0 outside fenced code; a fence toggles on any
// line whose left-trimmed text starts with three backticks. A section runs
// to the next heading of the same or a higher level, so subsections belong
// to it; its content is trimmed.
func Sections(body string) []Section {
	lines := strings.Split(body, "\n")
	type head struct{ line, level int }
	var heads []head
	inFence := false
	for i, l := range lines {
		if isFence(l) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if lv := headingLevel(l); lv > 0 {
			heads = append(heads, head{i, lv})
		}
	}
	out := make([]Section, 0, len(heads))
	for j, h := range heads {
		end := len(lines)
		for _, k := range heads[j+1:] {
			if k.level <= h.level {
				end = k.line
				break
			}
		}
		title := strings.TrimSpace(strings.TrimLeft(lines[h.line], "#"))
		content := strings.TrimSpace(strings.Join(lines[h.line+1:end], "\n"))
		out = append(out, Section{Title: title, Level: h.level, Content: content})
	}
	return out
}

// FindSection returns the first section whose trimmed title equals title
// exactly (case-sensitive).
func FindSection(body, title string) (Section, bool) {
	for _, s := range Sections(body) {
		if s.Title == title {
			return s, true
		}
	}
	return Section{}, false
}
