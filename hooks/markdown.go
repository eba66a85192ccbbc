package hooks

import (
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/goccy/go-yaml"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/yamlguard"
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
	if m, ok := simpleFrontMatter(block); ok {
		return m, true
	}
	// The front matter is the agent's text: bound it before the parser,
	// whose cost explodes with nesting. Refused means unparseable.
	if yamlguard.Check([]byte(block), frontMatterLimits) != nil {
		return nil, false
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

// frontMatterLimits bound a front-matter block; real ones are a few lines.
var frontMatterLimits = yamlguard.Limits{MaxBytes: 64 << 10, MaxDepth: yamlguard.Default.MaxDepth, MaxIndent: yamlguard.Default.MaxIndent}

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
	// strings.TrimLeft(line, " \t") builds its cutset on every call; this
	// runs for every line of every artifact.
	i := 0
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	return strings.HasPrefix(line[i:], "```")
}

// headingLevel returns the number of leading '#' of an ATX heading at
// column 0 — one to six '#' followed by a space, a tab or the end of the
// line, as in CommonMark — or 0 when the line is not a heading ("#7 — the
// fix" is a paragraph).
func headingLevel(line string) int {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n == 0 || n > 6 {
		return 0
	}
	if n < len(line) && line[n] != ' ' && line[n] != '\t' && line[n] != '\r' {
		return 0
	}
	return n
}

// sectionSpan is a section located by line numbers; its content is built
// only when asked for.
type sectionSpan struct {
	title      string
	level      int
	start, end int // content lines [start, end)
}

// spans locates every section of body (see Sections) from its lines.
func spans(lines []string) []sectionSpan {
	return spansOf(len(lines), func(i int) string { return lines[i] })
}

// spansOf is spans over n lines given by line(i), so a document can locate
// its sections from line offsets without splitting its body.
func spansOf(n int, line func(int) string) []sectionSpan {
	type head struct{ line, level int }
	var heads []head
	inFence := false
	for i := 0; i < n; i++ {
		l := line(i)
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
	out := make([]sectionSpan, 0, len(heads))
	for j, h := range heads {
		end := n
		for _, k := range heads[j+1:] {
			if k.level <= h.level {
				end = k.line
				break
			}
		}
		out = append(out, sectionSpan{title: strings.TrimSpace(strings.TrimLeft(line(h.line), "#")), level: h.level, start: h.line + 1, end: end})
	}
	return out
}

// Sections lists the document's sections in order. A heading is an ATX
// heading at column 0 outside fenced code (see headingLevel); a fence
// toggles on any line whose left-trimmed text starts with three backticks.
// A section runs to the next heading of the same or a higher level, so
// subsections belong to it; its content is trimmed.
func Sections(body string) []Section {
	lines := strings.Split(body, "\n")
	sp := spans(lines)
	out := make([]Section, len(sp))
	for i, s := range sp {
		out[i] = Section{Title: s.title, Level: s.level, Content: strings.TrimSpace(strings.Join(lines[s.start:s.end], "\n"))}
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

// document is an artifact read and parsed once.
type document struct {
	text string
	fm   map[string]any
	body string
	// spans locate the sections in body by byte offsets; the text of a
	// section is one substring, built only when a hook asks for it.
	spans []docSpan
	err   error

	lowerOnce sync.Once
	lower     string
}

// docSpan is a section of a document's body: its heading's title and
// level, and its content as body[start:end] — the lines under the heading
// up to the next heading of the same or a higher level, joined by newlines
// (what Sections gives before trimming).
type docSpan struct {
	title      string
	level      int
	start, end int
}

// newDocument parses text: front matter and section spans.
func newDocument(text string) *document {
	d := &document{text: text}
	d.fm, d.body = FrontMatter(text)
	d.spans = bodySpans(d.body)
	return d
}

// bodySpans locates the sections of body exactly as Sections does (the
// same headings, fences and nesting) without splitting it into lines
// (FuzzDocumentSections compares the two).
func bodySpans(body string) []docSpan {
	// First pass: each heading's title and level, with start and end
	// holding its line's start and the next line's start; the second pass
	// turns those into the content's bounds in place (a span reads only
	// the line starts of the headings after it, not yet rewritten). A
	// heading starts a line with '#': counting those bounds the spans, so
	// the slice is allocated once.
	out := make([]docSpan, 0, strings.Count(body, "\n#")+1)
	// Only two kinds of line matter — fences and lines starting with '#' —
	// and both are found by searching for their markers rather than by
	// walking every line; they are taken in the order they appear.
	inFence := false
	fence, afterFence := markedLine(body, 0, "```", onlyBlanks)
	hash := hashLine(body, 0)
	for fence >= 0 || hash >= 0 {
		if fence >= 0 && (hash < 0 || fence < hash) {
			inFence = !inFence
			fence, afterFence = markedLine(body, afterFence, "```", onlyBlanks)
			continue
		}
		next := len(body) + 1
		l := body[hash:]
		if end := strings.IndexByte(l, '\n'); end >= 0 {
			l, next = l[:end], hash+end+1
		}
		if !inFence {
			if lv := headingLevel(l); lv > 0 {
				out = append(out, docSpan{title: strings.TrimSpace(strings.TrimLeft(l, "#")), level: lv, start: hash, end: next})
			}
		}
		hash = hashLine(body, next)
	}
	for j := range out {
		// The content runs to the line before the next heading of the
		// same or a higher level, or to the end of the body.
		stop := len(body) + 1
		for _, k := range out[j+1:] {
			if k.level <= out[j].level {
				stop = k.start
				break
			}
		}
		if first := out[j].end; first < stop {
			out[j].start, out[j].end = first, stop-1
		} else {
			out[j].start, out[j].end = 0, 0
		}
	}
	return out
}

// hashLine is the start of the first line at or after off (a line start)
// that begins with '#', or -1.
func hashLine(body string, off int) int {
	if off >= len(body) {
		return -1
	}
	if body[off] == '#' {
		return off
	}
	if i := strings.Index(body[off:], "\n#"); i >= 0 {
		return off + i + 1
	}
	return -1
}

// lowerBody is the body in lower case, computed once per document.
func (d *document) lowerBody() string {
	d.lowerOnce.Do(func() { d.lower = toLower(d.body) })
	return d.lower
}

// containsLower reports whether the body in lower case contains needle,
// itself lower case — strings.Contains(d.lowerBody(), needle) — without
// lowering the body when it can: for an ASCII needle, an ASCII case-folding
// search of the body gives the same answer, because a rune outside ASCII
// lowers to a rune outside ASCII except U+0130 (to "i") and U+212A (to "k")
// (TestOnlyTwoRunesLowerIntoASCII). A needle with an "i" or a "k" over a body
// holding either rune, and a needle outside ASCII, take the lowered body.
func (d *document) containsLower(needle string) bool {
	if !isASCII(needle) || strings.ContainsAny(needle, "ik") && (strings.Contains(d.body, "\u0130") || strings.Contains(d.body, "\u212a")) {
		return strings.Contains(d.lowerBody(), needle)
	}
	return containsASCIIFold(d.body, needle)
}

// containsASCIIFold reports whether s contains needle (ASCII, lower case)
// when s's ASCII capitals are read as small letters; no other byte of s
// matches a byte of needle unless equal to it.
func containsASCIIFold(s, needle string) bool {
	if needle == "" {
		return true
	}
	lo, up := needle[0], needle[0]
	if 'a' <= lo && lo <= 'z' {
		up = lo - 'a' + 'A'
	}
	// The next occurrence of each case of the first byte, at or after i
	// (-1: none left); each is searched for again only once passed.
	nextLo, nextUp := -2, -2
	find := func(c byte, from int) int {
		if j := strings.IndexByte(s[from:], c); j >= 0 {
			return from + j
		}
		return -1
	}
	for i := 0; i+len(needle) <= len(s); {
		if nextLo != -1 && nextLo < i {
			nextLo = find(lo, i)
		}
		if up != lo && nextUp != -1 && nextUp < i {
			nextUp = find(up, i)
		}
		j := nextLo
		if up != lo && nextUp >= 0 && (j < 0 || nextUp < j) {
			j = nextUp
		}
		if j < 0 || j+len(needle) > len(s) {
			return false
		}
		if asciiFoldEqual(s[j:j+len(needle)], needle) {
			return true
		}
		i = j + 1
	}
	return false
}

// asciiFoldEqual reports whether a, its ASCII capitals lowered, is b.
func asciiFoldEqual(a, b string) bool {
	for k := 0; k < len(b); k++ {
		c := a[k]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != b[k] {
			return false
		}
	}
	return true
}

// toLower is strings.ToLower without strings.Map's per-rune cost on ASCII:
// artifacts are mostly ASCII with the odd dash or arrow, which sends the
// standard library down its rune-by-rune path for the whole text. ASCII
// bytes are lowered directly, other runes through unicode.ToLower, and an
// invalid byte becomes U+FFFD — exactly as strings.ToLower
// (FuzzToLower compares them).
func toLower(s string) string {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			break
		}
	}
	if i == len(s) {
		return s
	}
	b := make([]byte, i, len(s)+8)
	copy(b, s[:i])
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b = append(b, c)
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		b = utf8.AppendRune(b, unicode.ToLower(r))
		i += w
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// section finds the first section titled exactly title.
func (d *document) section(title string) (Section, bool) {
	for _, s := range d.spans {
		if s.title == title {
			return Section{Title: s.title, Level: s.level, Content: strings.TrimSpace(d.body[s.start:s.end])}, true
		}
	}
	return Section{}, false
}

// loadDoc reads and parses an artifact. Under check the artifacts memoise,
// so each file is read and parsed once per evaluation however many hooks
// look at it. Callers must not modify the result.
func loadDoc(a graph.Artifacts, name string) *document {
	load := func() any {
		if !fs.ValidPath(name) {
			return &document{err: fmt.Errorf("invalid artifact name %q", name)}
		}
		// Under check the bytes are borrowed until the check ends, and
		// the document is memoised for exactly that long; otherwise they
		// are ours (fs.ReadFile returns a copy the caller owns). Never
		// written again either way, the text shares them instead of
		// copying the whole artifact once more — so whatever a hook
		// returns must copy what it takes from the text (graph.Borrower).
		b, err := borrowArtifact(a, name, MaxArtifactBytes)
		if err != nil {
			return &document{err: err}
		}
		if len(b) == 0 {
			return newDocument("")
		}
		return newDocument(unsafe.String(&b[0], len(b)))
	}
	if m, ok := a.(graph.Memoizer); ok {
		return m.Memo("doc\x00"+name, load).(*document)
	}
	return load().(*document)
}

// simpleFrontMatter parses the front matter almost every artifact has —
// top-level `key: value` lines whose values are plain words, quoted strings
// without escapes, small integers, or flow lists of those — without the
// general YAML parser, which costs a hundred times more on the Stop hook's
// path. It reports false for anything else, and the caller falls back to the
// full parser; FuzzSimpleFrontMatter proves both agree wherever this one
// answers.
func simpleFrontMatter(block string) (map[string]any, bool) {
	for _, c := range block {
		if c < 0x20 && c != '\n' || c == 0x7f {
			return nil, false // tabs, CR, controls: leave to the YAML parser
		}
	}
	out := map[string]any{}
	for _, line := range strings.Split(block, "\n") {
		rest := strings.TrimLeft(line, " ")
		if rest == "" || rest[0] == '#' {
			continue // blank, or a comment line at any indentation
		}
		if len(rest) != len(line) {
			return nil, false // nested content
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok || !simpleKey(key) {
			return nil, false
		}
		if _, dup := out[key]; dup {
			return nil, false
		}
		if val != "" && val[0] != ' ' {
			return nil, false
		}
		val = strings.Trim(val, " ")
		if strings.HasPrefix(val, "[") && strings.Contains(val, `"`) {
			// A flow list with double-quoted items (approvedBy: ["@who
			// (PR #7: \"ok\", 2026-07-28)"]): commas, "#" and escaped
			// quotes inside the quotes are text, not structure.
			v, ok := quotedFlowList(val)
			if !ok {
				return nil, false
			}
			out[key] = v
			continue
		}
		val, ok = stripComment(val)
		if !ok {
			return nil, false
		}
		v, ok := simpleValue(val)
		if !ok {
			return nil, false
		}
		out[key] = v
	}
	return out, true
}

// quotedFlowList reads a flow list whose items are double-quoted strings
// (escapes limited to \" and \\, printable text otherwise) or the plain
// scalars simpleScalar accepts, followed by nothing or a " # comment". It
// reports false for anything else.
func quotedFlowList(v string) ([]any, bool) {
	items := []any{}
	i := 1
	skip := func() {
		for i < len(v) && v[i] == ' ' {
			i++
		}
	}
	for {
		skip()
		if i >= len(v) {
			return nil, false
		}
		if v[i] == '"' {
			s, next, ok := doubleQuoted(v, i)
			if !ok {
				return nil, false
			}
			items = append(items, s)
			i = next
		} else {
			j := strings.IndexAny(v[i:], ",]")
			if j < 0 {
				return nil, false
			}
			x, ok := simpleScalar(strings.Trim(v[i:i+j], " "))
			if !ok {
				return nil, false
			}
			items = append(items, x)
			i += j
		}
		skip()
		if i >= len(v) {
			return nil, false
		}
		if v[i] == ']' {
			i++
			break
		}
		if v[i] != ',' {
			return nil, false
		}
		i++
	}
	rest := v[i:]
	if tail := strings.TrimLeft(rest, " "); tail != "" && (tail[0] != '#' || len(tail) == len(rest)) {
		return nil, false // text after the list, or "#" glued to it
	}
	return items, true
}

// doubleQuoted reads the double-quoted string starting at v[at]: its value
// and the index after its closing quote. Only the escapes \" and \\ are
// read; any other escape, a control character or a rune that is not
// printable is refused (left to the YAML parser).
func doubleQuoted(v string, at int) (string, int, bool) {
	var b strings.Builder
	for i := at + 1; i < len(v); {
		c := v[i]
		switch {
		case c == '"':
			return b.String(), i + 1, true
		case c == '\\':
			if i+1 >= len(v) || v[i+1] != '"' && v[i+1] != '\\' {
				return "", 0, false
			}
			b.WriteByte(v[i+1])
			i += 2
		case c < utf8.RuneSelf:
			if c < 0x20 || c == 0x7f {
				return "", 0, false
			}
			b.WriteByte(c)
			i++
		default:
			r, w := utf8.DecodeRuneInString(v[i:])
			if r == utf8.RuneError || !unicode.IsPrint(r) {
				return "", 0, false
			}
			b.WriteString(v[i : i+w])
			i += w
		}
	}
	return "", 0, false
}

// stripComment removes a trailing " # comment" from a value. A quoted
// value ends at its closing quote; anything after it must be a comment.
// Values with non-ASCII text are refused.
func stripComment(v string) (string, bool) {
	if v != "" && (v[0] == '"' || v[0] == '\'') {
		end := strings.IndexByte(v[1:], v[0])
		if end < 0 {
			return "", false
		}
		q, tail := v[:end+2], strings.TrimLeft(v[end+2:], " ")
		if tail != "" && tail[0] != '#' || tail != "" && len(tail) == len(v[end+2:]) {
			return "", false // text after the quote, or "#" glued to it
		}
		return q, isASCII(q)
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = strings.TrimRight(v[:i], " ")
	}
	return v, isASCII(v)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func simpleKey(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for i, c := range k {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// simpleValue reads a scalar or a flow list of scalars.
func simpleValue(v string) (any, bool) {
	if v == "{}" {
		return map[string]any{}, true
	}
	if strings.HasPrefix(v, "[") {
		if !strings.HasSuffix(v, "]") {
			return nil, false
		}
		inner := strings.Trim(v[1:len(v)-1], " ")
		items := []any{}
		if inner == "" {
			return items, true
		}
		for _, part := range strings.Split(inner, ",") {
			x, ok := simpleScalar(strings.Trim(part, " "))
			if !ok {
				return nil, false
			}
			items = append(items, x)
		}
		return items, true
	}
	return simpleScalar(v)
}

// simpleScalar accepts plain words, quoted strings without escapes or inner
// quotes, and integers without leading zeros. Anything YAML might read as
// another type (booleans, null, floats, dates, …) is refused.
func simpleScalar(v string) (any, bool) {
	if v == "" {
		return nil, false
	}
	if n := len(v); n >= 2 && (v[0] == '"' && v[n-1] == '"' || v[0] == '\'' && v[n-1] == '\'') {
		inner := v[1 : n-1]
		if strings.ContainsAny(inner, "\"'\\\n\t") {
			return nil, false
		}
		for _, r := range inner {
			if r < 0x20 || r == 0x7f || r >= 0x80 {
				return nil, false
			}
		}
		return inner, true
	}
	if isSmallInt(v) {
		n := 0
		neg := v[0] == '-'
		for _, c := range strings.TrimPrefix(v, "-") {
			n = n*10 + int(c-'0')
		}
		if neg {
			n = -n
		}
		return uint64OrInt(n, neg), true
	}
	for i, c := range v {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '/'):
		case i > 0 && c == ' ' && v[i-1] != ' ' && i < len(v)-1:
		default:
			return nil, false
		}
	}
	switch strings.ToLower(v) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null", "nan", "inf":
		return nil, false
	}
	if strings.Contains(v, " #") {
		return nil, false
	}
	return v, true
}

func isSmallInt(v string) bool {
	d := strings.TrimPrefix(v, "-")
	if d == "" || len(d) > 9 || (len(d) > 1 && d[0] == '0') {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// uint64OrInt mirrors the YAML library's integer types: uint64 for
// non-negative values, int64 for negative ones.
func uint64OrInt(n int, neg bool) any {
	if neg {
		return int64(n)
	}
	return uint64(n)
}
