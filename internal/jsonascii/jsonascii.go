// Package jsonascii writes JSON text the way the-loop's Python json.dumps
// does by default: every non-ASCII character escaped as \uXXXX. Both
// graph-state.json (package graph) and the event log (package loop) are
// written so, and must stay byte-identical with the reference's files.
// Pure: no I/O, no module imports, so graph may use it.
package jsonascii

import (
	"strconv"
	"unicode/utf8"
)

// Escape rewrites every non-ASCII rune in JSON text as a \uXXXX escape
// (surrogate pairs above U+FFFF). Valid because non-ASCII can only occur
// inside JSON strings. Text that is all ASCII is returned as is.
func Escape(b []byte) []byte {
	ascii := true
	for _, c := range b {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r < utf8.RuneSelf {
			out = append(out, b[0])
			b = b[1:]
			continue
		}
		if r > 0xFFFF {
			r -= 0x10000
			out = appendU(out, 0xD800+(r>>10))
			out = appendU(out, 0xDC00+(r&0x3FF))
		} else {
			out = appendU(out, r)
		}
		b = b[size:]
	}
	return out
}

func appendU(out []byte, r rune) []byte {
	s := strconv.FormatInt(int64(r), 16)
	out = append(out, '\\', 'u')
	for i := len(s); i < 4; i++ {
		out = append(out, '0')
	}
	return append(out, s...)
}
