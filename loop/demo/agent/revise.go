package agent

import "strings"

// reviewHeading is the section record-feedback appends a gate's review to.
const reviewHeading = "## Review comments"

// Revise returns body as the new text of an artifact whose current text is
// old, keeping what theloop wrote into the artifact at its approval gate:
// the front matter (the lock, docs/decisions.md §1) and the ## Review comments section
// (the review, R5.2), which goes back at the end of the document. A
// competent agent edits an approved document; it does not drop its review —
// and the shipped graphs block a lock whose review was lost. old == ""
// (a new file) returns body unchanged.
func Revise(old, body string) string {
	if old == "" {
		return body
	}
	if fm, _, ok := splitFrontMatter(old); ok {
		if _, _, has := splitFrontMatter(body); !has {
			body = fm + body
		}
	}
	review := section(old, reviewHeading)
	if review == "" || strings.Contains(body, "\n"+reviewHeading+"\n") {
		return body
	}
	return strings.TrimRight(body, "\n") + "\n\n" + review + "\n"
}

// section returns a "## " section of text — its heading line through the
// line before the next "## " heading (or the end) — without trailing blank
// lines; "" when text has none. Headings inside code fences do not count.
func section(text, heading string) string {
	lines := strings.Split(text, "\n")
	start, end := -1, len(lines)
	fence := false
	for i, l := range lines {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		switch {
		case start < 0 && strings.TrimRight(l, " ") == heading:
			start = i
		case start >= 0 && strings.HasPrefix(l, "## "):
			end = i
		}
		if end < len(lines) {
			break
		}
	}
	if start < 0 {
		return ""
	}
	return strings.TrimRight(strings.Join(lines[start:end], "\n"), "\n ")
}
