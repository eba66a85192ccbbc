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
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c == '\n' {
			line++
			atLineStart, indent, lineDepth = true, 0, 0
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
		prev = c
	}
	return nil
}
