// Package yamlguard bounds YAML text before a parser sees it. Everything an
// agent can write (artifact front matter, .the-loop/*.yaml, a --graph file)
// is hostile input, and the YAML library's cost grows steeply with nesting:
// 100 KB of "[[[…" cost 6–7 GB of memory. Check is one linear pass over the
// bytes with no allocation; it over-estimates rather than under-estimates
// depth (brackets inside an unquoted scalar count), so what it accepts is
// cheap to parse, and only absurd files are refused.
package yamlguard

import (
	"errors"
	"fmt"
	"strings"
)

// Limits bound a document.
type Limits struct {
	// MaxBytes bounds the size.
	MaxBytes int
	// MaxDepth bounds flow nesting ([ and {) and the block nesting of one
	// line ("- - - x", "? ? x").
	MaxDepth int
	// MaxIndent bounds a line's indentation in columns, which bounds block
	// nesting.
	MaxIndent int
}

// Default limits: far above any real configuration, graph or front matter.
var Default = Limits{MaxBytes: 1 << 20, MaxDepth: 64, MaxIndent: 256}

// ErrTooLarge, ErrTooDeep: the reasons Check refuses a document.
var (
	ErrTooLarge = errors.New("YAML document too large")
	ErrTooDeep  = errors.New("YAML document nested too deeply")
)

// Check reports whether data stays within l. The error names the line.
func Check(data []byte, l Limits) error {
	if l.MaxBytes > 0 && len(data) > l.MaxBytes {
		return fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrTooLarge, len(data), l.MaxBytes)
	}
	depth, line := 0, 1
	atLineStart := true
	indent := 0
	lineDepth := 0
	var quote byte // the open quote, or 0
	prev := byte('\n')
	// A block scalar ("key: |" or "- >-") holds text, not YAML: its lines,
	// indented deeper than the line that opened it, are not scanned.
	blockParent := -1
	lastSignificant := byte(0) // last byte of the line outside comments
	lineStart := 0
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c == '\n' {
			if quote == 0 && depth == 0 && blockParent < 0 && (lastSignificant == '|' || lastSignificant == '>') && opensBlockScalar(data[lineStart:i]) {
				blockParent = indent
			}
			lineStart = i + 1
			line++
			atLineStart, indent, lineDepth, lastSignificant = true, 0, 0, 0
			prev = c
			continue
		}
		if quote != 0 {
			switch {
			case quote == '"' && c == '\\':
				i++ // skip the escaped byte
			case c == quote:
				if quote == '\'' && i+1 < len(data) && data[i+1] == '\'' {
					i++ // '' inside a single-quoted scalar
				} else {
					quote = 0
				}
			}
			prev = c
			continue
		}
		if atLineStart {
			switch c {
			case ' ':
				indent++
				if l.MaxIndent > 0 && indent > l.MaxIndent {
					return fmt.Errorf("%w: line %d is indented more than %d columns", ErrTooDeep, line, l.MaxIndent)
				}
				prev = c
				continue
			case '\r', '\t':
				prev = c
				continue
			}
			if blockParent >= 0 {
				if indent > blockParent {
					// Text of the block scalar: skip to the end of the line.
					for i+1 < len(data) && data[i+1] != '\n' {
						i++
					}
					prev = data[i]
					continue
				}
				blockParent = -1
			}
			switch c {
			case '-', '?', ':':
				// A block indicator followed by a space opens a nested node
				// on the same line.
				if i+1 < len(data) && (data[i+1] == ' ' || data[i+1] == '\t') {
					lineDepth++
					if l.MaxDepth > 0 && lineDepth > l.MaxDepth {
						return fmt.Errorf("%w: line %d nests more than %d block levels", ErrTooDeep, line, l.MaxDepth)
					}
					indent++
					prev = c
					continue
				}
			}
			atLineStart = false
		}
		switch c {
		case '#':
			if prev == ' ' || prev == '\t' || prev == '\n' {
				for i+1 < len(data) && data[i+1] != '\n' {
					i++
				}
				prev = '#'
				continue
			}
		case '"', '\'':
			switch prev {
			case ' ', '\t', '\n', '[', '{', ',', ':', '-', '?':
				quote = c
			}
		case '[', '{':
			depth++
			if l.MaxDepth > 0 && depth > l.MaxDepth {
				return fmt.Errorf("%w: line %d opens more than %d nested [ or { levels", ErrTooDeep, line, l.MaxDepth)
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		}
		if c != ' ' && c != '\t' && c != '\r' {
			lastSignificant = c
			// Chomping and indentation indicators after | or >.
			if (c == '-' || c == '+' || (c >= '1' && c <= '9')) && i > 0 {
				for j := i - 1; j >= 0 && data[j] != '\n'; j-- {
					b := data[j]
					if b == '|' || b == '>' {
						lastSignificant = b
						break
					}
					if b != '-' && b != '+' && !(b >= '1' && b <= '9') {
						break
					}
				}
			}
		}
		prev = c
	}
	return nil
}

// opensBlockScalar reports whether a line ends with a block scalar header:
// "|" or ">" (with chomping or indentation indicators) right after a ": ",
// "- " or "? " indicator or node properties — not after a scalar, where
// the parser would not read one and might parse what follows as YAML.
func opensBlockScalar(line []byte) bool {
	if i := indexComment(line); i >= 0 {
		line = line[:i]
	}
	fields := strings.Fields(string(line))
	if len(fields) == 0 {
		return false
	}
	last := strings.TrimRight(fields[len(fields)-1], "+-123456789")
	if last != "|" && last != ">" {
		return false
	}
	for k := len(fields) - 2; k >= 0; k-- {
		f := fields[k]
		switch {
		case f == "-" || f == "?" || f == ":" || strings.HasSuffix(f, ":"):
			return true
		case f[0] == '!' || f[0] == '&':
			continue // a tag or an anchor
		default:
			return false
		}
	}
	return true // the header alone on its line
}

// indexComment finds a comment's "#" (preceded by a blank or first).
func indexComment(line []byte) int {
	for i, c := range line {
		if c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			return i
		}
	}
	return -1
}
