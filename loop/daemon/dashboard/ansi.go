package dashboard

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The live pane is rendered on the server, not by xterm.js. tmux has
// already emulated the terminal (capture-pane -e hands over the screen as
// lines of text with SGR colour sequences), so the browser needs no
// terminal emulator, only coloured text: a ~150-line parser here instead
// of a 300 KB script, an npm package to pin and its licence to ship, and a
// second code path that interprets bytes the agent wrote. The frames
// reach the page as JSON spans [class, text] that dash.js writes with
// textContent; colours are class names (term.css), because the page's
// Content-Security-Policy allows no inline style.

// Bounds on a captured screen (an agent controls what its pane shows).
const (
	maxScreenRows = 500
	maxRowRunes   = 1000
)

// span is a run of text with one look: its CSS classes ("" default).
type span struct {
	Class string
	Text  string
}

// MarshalJSON writes a span as [class, text] (half the bytes of an object).
func (s span) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, "[%s,%s]", strconv.Quote(s.Class), jsonString(s.Text)), nil
}

// jsonString quotes s for JSON (strconv.Quote's \x escapes are not JSON).
func jsonString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x2028 || r == 0x2029 || r == '<' || r == '>' || r == '&':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// sgrState is the current graphic rendition.
type sgrState struct {
	fg, bg                                int // -1 default, 0..255
	bold, dim, italic, underline, reverse bool
}

func (s sgrState) class() string {
	fg, bg := s.fg, s.bg
	var c []string
	if s.reverse {
		fg, bg = bg, fg
		c = append(c, "rv")
	}
	if fg >= 0 {
		c = append(c, "f"+strconv.Itoa(fg))
	}
	if bg >= 0 {
		c = append(c, "b"+strconv.Itoa(bg))
	}
	if s.bold {
		c = append(c, "bo")
	}
	if s.dim {
		c = append(c, "dm")
	}
	if s.italic {
		c = append(c, "it")
	}
	if s.underline {
		c = append(c, "un")
	}
	return strings.Join(c, " ")
}

// parseScreen turns a capture (lines with SGR sequences) into rows of
// spans. Other escape sequences (CSI, OSC such as hyperlinks) are
// dropped, control characters too; the screen is bounded in rows and
// runes per row. It never panics.
func parseScreen(screen string) [][]span {
	screen = strings.TrimRight(screen, "\n")
	lines := strings.Split(screen, "\n")
	if len(lines) > maxScreenRows {
		lines = lines[len(lines)-maxScreenRows:]
	}
	st := sgrState{fg: -1, bg: -1}
	rows := make([][]span, 0, len(lines))
	for _, line := range lines {
		var row []span
		var text strings.Builder
		runes := 0
		flush := func() {
			if text.Len() == 0 {
				return
			}
			cls := st.class()
			if n := len(row); n > 0 && row[n-1].Class == cls {
				row[n-1].Text += text.String()
			} else {
				row = append(row, span{Class: cls, Text: text.String()})
			}
			text.Reset()
		}
		for i := 0; i < len(line); {
			c := line[i]
			if c == 0x1b && i+1 < len(line) {
				switch line[i+1] {
				case '[': // CSI: parameters, intermediates, a final byte
					j := i + 2
					for j < len(line) && (line[j] < 0x40 || line[j] > 0x7e) {
						j++
					}
					if j < len(line) && line[j] == 'm' {
						flush()
						st.apply(line[i+2 : j])
					}
					i = j + 1
					continue
				case ']': // OSC: up to BEL or ST
					j := i + 2
					for j < len(line) && line[j] != 0x07 && !(line[j] == 0x1b && j+1 < len(line) && line[j+1] == '\\') {
						j++
					}
					if j < len(line) && line[j] == 0x1b {
						j++
					}
					i = j + 1
					continue
				default:
					i += 2
					continue
				}
			}
			r, size := utf8.DecodeRuneInString(line[i:])
			i += size
			switch {
			case r == '\t':
				r = ' '
			case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
				continue
			}
			if runes >= maxRowRunes {
				continue
			}
			runes++
			text.WriteRune(r)
		}
		flush()
		rows = append(rows, row)
	}
	return rows
}

// apply applies an SGR parameter string ("1;38;5;208", "38:2::255:0:0").
func (s *sgrState) apply(params string) {
	if params == "" {
		*s = sgrState{fg: -1, bg: -1}
		return
	}
	ps := strings.FieldsFunc(params, func(r rune) bool { return r == ';' || r == ':' })
	num := func(k int) int {
		if k >= len(ps) {
			return -1
		}
		n, err := strconv.Atoi(ps[k])
		if err != nil || n < 0 || n > 255 {
			return -1
		}
		return n
	}
	for k := 0; k < len(ps) && k < 64; k++ {
		n, err := strconv.Atoi(ps[k])
		if err != nil {
			continue
		}
		switch {
		case n == 0:
			*s = sgrState{fg: -1, bg: -1}
		case n == 1:
			s.bold = true
		case n == 2:
			s.dim = true
		case n == 3:
			s.italic = true
		case n == 4:
			s.underline = true
		case n == 7:
			s.reverse = true
		case n == 22:
			s.bold, s.dim = false, false
		case n == 23:
			s.italic = false
		case n == 24:
			s.underline = false
		case n == 27:
			s.reverse = false
		case n >= 30 && n <= 37:
			s.fg = n - 30
		case n >= 40 && n <= 47:
			s.bg = n - 40
		case n >= 90 && n <= 97:
			s.fg = n - 90 + 8
		case n >= 100 && n <= 107:
			s.bg = n - 100 + 8
		case n == 39:
			s.fg = -1
		case n == 49:
			s.bg = -1
		case n == 38 || n == 48:
			c, used := extColour(ps[k+1:], num, k+1)
			if n == 38 {
				s.fg = c
			} else {
				s.bg = c
			}
			k += used
		}
	}
}

// extColour reads 5;n or 2;r;g;b after 38/48 and returns the colour (a
// 256-palette index, true colour mapped onto the 6×6×6 cube) and how many
// parameters it used.
func extColour(rest []string, num func(int) int, at int) (int, int) {
	if len(rest) == 0 {
		return -1, 0
	}
	switch rest[0] {
	case "5":
		return num(at + 1), 2
	case "2":
		// Some emitters put a colour-space id first (38:2::r:g:b); the
		// field splitter dropped the empty one.
		r, g, b := num(at+1), num(at+2), num(at+3)
		if r < 0 || g < 0 || b < 0 {
			return -1, 4
		}
		q := func(v int) int { return (v*5 + 127) / 255 }
		return 16 + 36*q(r) + 6*q(g) + q(b), 4
	}
	return -1, 1
}

// termCSS is the palette: xterm's 256 colours as .fN / .bN classes.
var termCSS = func() string {
	base := []string{"#000000", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
		"#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff"}
	var b strings.Builder
	b.WriteString(".term{background:#1e1e1e;color:#d4d4d4;font:13px/1.25 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;padding:8px;overflow:auto;max-height:70vh;white-space:pre;margin:0}\n")
	b.WriteString(".term .ln{min-height:1.25em}\n.term .rv{color:#1e1e1e;background:#d4d4d4}\n.term .bo{font-weight:bold}\n.term .dm{opacity:.7}\n.term .it{font-style:italic}\n.term .un{text-decoration:underline}\n")
	colour := func(i int) string {
		switch {
		case i < 16:
			return base[i]
		case i < 232:
			i -= 16
			lv := func(v int) int {
				if v == 0 {
					return 0
				}
				return 55 + v*40
			}
			return fmt.Sprintf("#%02x%02x%02x", lv(i/36), lv(i/6%6), lv(i%6))
		}
		g := 8 + (i-232)*10
		return fmt.Sprintf("#%02x%02x%02x", g, g, g)
	}
	for i := range 256 {
		fmt.Fprintf(&b, ".term .f%d{color:%s}.term .b%d{background:%s}\n", i, colour(i), i, colour(i))
	}
	return b.String()
}()
