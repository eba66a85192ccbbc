package hooks

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A small parser of the mermaid subset the-loop's artifacts draw with
// (R5.4: "every mermaid block parses"): flowchart / graph and
// sequenceDiagram are parsed statement by statement — node shapes and
// labels, links and their text, subgraph / block nesting, notes, message
// arrows. Every other diagram type is checked for its keyword only; that is
// the documented limit. The grammar is deliberately the common subset: a
// statement this parser does not know is reported, with its line, so an
// exotic but valid construct is a finding the author can rephrase — the
// parser never guesses that text renders.
//
// It works on text an agent wrote: it is linear in the input, allocates per
// line, never recurses on nesting and never panics (FuzzMermaid).

// mermaidIssue is one problem in one diagram: line is 1-based within the
// block (0 when it concerns the whole block).
type mermaidIssue struct {
	line int
	text string
}

// maxMermaidIssues bounds the findings reported for one block.
const maxMermaidIssues = 5

// parseMermaid checks one diagram (the lines between the fences).
func parseMermaid(lines []string) []mermaidIssue {
	// Front matter (---\n…\n---) and %%{init}%% directives and %% comments
	// may precede the diagram type, as mermaid's own detection allows.
	i := 0
	if i < len(lines) && strings.TrimSpace(lines[i]) == "---" {
		end := -1
		for j := i + 1; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "---" {
				end = j
				break
			}
		}
		if end < 0 {
			return []mermaidIssue{{1, "front matter opened with --- is never closed"}}
		}
		i = end + 1
	}
	for ; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		if t != "" && !strings.HasPrefix(t, "%%") {
			break
		}
	}
	if i == len(lines) {
		return []mermaidIssue{{0, "is empty"}}
	}
	first := strings.TrimSpace(lines[i])
	kw, rest := first, ""
	if k := strings.IndexAny(first, " \t;"); k >= 0 {
		kw, rest = first[:k], strings.TrimSpace(first[k:])
	}
	switch kw {
	case "flowchart", "graph":
		p := &flowParser{}
		return p.parse(rest, lines, i)
	case "sequenceDiagram":
		p := &seqParser{}
		return p.parse(rest, lines, i)
	}
	for _, t := range mermaidTypes {
		if kw == t {
			return nil // the keyword is all that is checked (see above)
		}
	}
	shown := first
	if r := []rune(shown); len(r) > 40 {
		shown = string(r[:40])
	}
	return []mermaidIssue{{i + 1, fmt.Sprintf("does not start with a diagram type (found '%s')", shown)}}
}

// issues collects findings, at most maxMermaidIssues.
type issues []mermaidIssue

func (is *issues) add(line int, format string, args ...any) {
	if len(*is) < maxMermaidIssues {
		*is = append(*is, mermaidIssue{line, fmt.Sprintf(format, args...)})
	}
}

// quote shows a piece of the diagram in a finding, bounded.
func quote(s string) string {
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > 30 {
		s = string(r[:30]) + "…"
	}
	return "'" + s + "'"
}

// statements splits a line into ;-separated statements, outside quotes,
// brackets and |link text|. From a sequence statement's first colon on
// (sequence is true), the rest is the message or note text: a ; in it is
// left to the text — mermaid versions differ on it, and a doubt never
// blocks.
func statements(line string, sequence bool) []string {
	var out []string
	depth, quoted, piped, text, start := 0, false, false, false, 0
	for k := 0; k < len(line); k++ {
		switch c := line[k]; {
		case text:
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == ':' && sequence:
			text = true
		case c == '|':
			piped = !piped
		case piped:
		case c == '[' || c == '(' || c == '{':
			depth++
		case c == ']' || c == ')' || c == '}':
			if depth > 0 {
				depth--
			}
		case c == ';' && depth == 0:
			out = append(out, line[start:k])
			start = k + 1
			text = false
		}
	}
	return append(out, line[start:])
}

// --- flowchart -------------------------------------------------------------

type flowParser struct {
	is       issues
	subgraph []int // lines of the open subgraphs
}

var flowDirections = map[string]bool{"TB": true, "TD": true, "BT": true, "RL": true, "LR": true}

func (p *flowParser) parse(header string, lines []string, at int) []mermaidIssue {
	header = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(header), ";"))
	if header != "" && !flowDirections[header] {
		p.is.add(at+1, "%s is not a direction (TB, TD, BT, RL or LR)", quote(header))
	}
	for n := at + 1; n < len(lines); n++ {
		for _, st := range statements(lines[n], false) {
			p.statement(n+1, strings.TrimSpace(st))
		}
	}
	for _, l := range p.subgraph {
		p.is.add(l, "subgraph is never closed with end")
	}
	return p.is
}

func (p *flowParser) statement(line int, st string) {
	if st == "" || strings.HasPrefix(st, "%%") {
		return
	}
	word, rest := st, ""
	if k := strings.IndexAny(st, " \t"); k >= 0 {
		word, rest = st[:k], strings.TrimSpace(st[k:])
	}
	switch word {
	case "subgraph":
		if rest == "" {
			p.is.add(line, "subgraph needs an id or a title")
		}
		p.subgraph = append(p.subgraph, line)
		return
	case "end":
		if rest == "" {
			if len(p.subgraph) == 0 {
				p.is.add(line, "end closes no subgraph")
				return
			}
			p.subgraph = p.subgraph[:len(p.subgraph)-1]
			return
		}
	case "direction":
		if !flowDirections[rest] {
			p.is.add(line, "%s is not a direction (TB, TD, BT, RL or LR)", quote(rest))
		}
		return
	case "classDef", "class", "style", "linkStyle", "click":
		if rest == "" {
			p.is.add(line, "%s needs its arguments", word)
		}
		return
	}
	if strings.HasPrefix(st, "accTitle") || strings.HasPrefix(st, "accDescr") {
		return
	}
	p.chain(line, st)
}

// chain parses `nodes (link nodes)*`, where nodes is `node (& node)*`.
func (p *flowParser) chain(line int, st string) {
	s := st
	for {
		for {
			var err string
			s, err = flowNode(s)
			if err != "" {
				p.is.add(line, "%s", err)
				return
			}
			s = strings.TrimLeft(s, " \t")
			if !strings.HasPrefix(s, "&") {
				break
			}
			s = strings.TrimLeft(s[1:], " \t")
		}
		if s == "" {
			return
		}
		var ok bool
		rest, ok := flowLink(s)
		if !ok {
			p.is.add(line, "cannot read %s as a link or a node — flowchart links are -->, ---, -.->, ==>, ~~~ (with |text| or -- text -->)", quote(s))
			return
		}
		s = strings.TrimLeft(rest, " \t")
		if s == "" {
			p.is.add(line, "the link at the end of %s leads to no node", quote(st))
			return
		}
	}
}

// flowShapes are a node's opening delimiters with their closers, longest
// first.
var flowShapes = []struct{ open, close string }{
	{"(((", ")))"}, {"((", "))"}, {"([", "])"}, {"[[", "]]"}, {"[(", ")]"},
	{"[/", "/]"}, {"[/", "\\]"}, {"[\\", "\\]"}, {"[\\", "/]"},
	{"{{", "}}"}, {"[", "]"}, {"(", ")"}, {"{", "}"}, {">", "]"},
}

// flowNode reads `id shape? (:::class)?` and returns the rest.
func flowNode(s string) (string, string) {
	k := 0
	for k < len(s) {
		r, size := utf8.DecodeRuneInString(s[k:])
		if r == '-' && (strings.HasPrefix(s[k:], "--") || strings.HasPrefix(s[k:], "-.")) {
			break
		}
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' || r == '.') {
			break
		}
		k += size
	}
	if k == 0 {
		return s, "expected a node id at " + quote(s)
	}
	id, s := s[:k], s[k:]
	if strings.HasPrefix(s, "@{") { // the v11 shape syntax: A@{ shape: … }
		end := strings.Index(s, "}")
		if end < 0 {
			return s, "node " + id + ": @{ is never closed with }"
		}
		s = s[end+1:]
	} else {
		for _, sh := range flowShapes {
			if !strings.HasPrefix(s, sh.open) {
				continue
			}
			rest, err := flowLabel(id, s[len(sh.open):], sh.close)
			if err != "" && sh.open == "[/" || err != "" && sh.open == "[\\" {
				continue // the other trapezoid closer may match
			}
			if err != "" {
				return s, err
			}
			s = rest
			break
		}
	}
	if strings.HasPrefix(s, ":::") {
		k := 3
		for k < len(s) && (s[k] == '_' || s[k] == '-' || s[k] < utf8.RuneSelf && (unicode.IsLetter(rune(s[k])) || unicode.IsDigit(rune(s[k])))) {
			k++
		}
		if k == 3 {
			return s, "node " + id + ": ::: names no class"
		}
		s = s[k:]
	}
	return s, ""
}

// flowLabel reads a label up to its closer. A quoted label may hold
// anything but a quote; an unquoted one may not hold brackets, which
// mermaid reads as shape delimiters.
func flowLabel(id, s, closer string) (string, string) {
	t := strings.TrimLeft(s, " ")
	if strings.HasPrefix(t, "\"") {
		end := strings.Index(t[1:], "\"")
		if end < 0 {
			return s, "node " + id + ": the quoted label is never closed"
		}
		after := strings.TrimLeft(t[end+2:], " ")
		if !strings.HasPrefix(after, closer) {
			return s, fmt.Sprintf("node %s: the label must end with %s after its closing quote", id, closer)
		}
		return after[len(closer):], ""
	}
	end := strings.Index(s, closer)
	if end < 0 {
		return s, fmt.Sprintf("node %s: the shape is never closed with %s", id, closer)
	}
	label := s[:end]
	if strings.TrimSpace(label) == "" && closer != ")" {
		return s, "node " + id + ": empty label — write the text, or drop the brackets"
	}
	if strings.ContainsAny(label, "[](){}\"") {
		return s, fmt.Sprintf("node %s: the label %s holds a bracket or quote mermaid reads as syntax — put the label in double quotes", id, quote(label))
	}
	return s[end+len(closer):], ""
}

// flowLink reads one link (arrow, with optional text) and returns the rest.
func flowLink(s string) (string, bool) {
	// An edge id (v11): e1@-->.
	if k := strings.Index(s, "@"); k > 0 && k < 40 && isWord(s[:k]) {
		s = s[k+1:]
	}
	// Text form: -- text -->, == text ==>, -. text .-> (spaces optional:
	// -.text.->).
	for _, f := range []struct{ open, tail string }{{"--", "-"}, {"==", "="}, {"-.", "."}} {
		if !strings.HasPrefix(s, f.open) {
			continue
		}
		rest := s[len(f.open):]
		if rest == "" || strings.ContainsRune("-=.>", rune(rest[0])) {
			continue // a plain arrow: -->, ---, -.->, ==>
		}
		for k := 1; k < len(rest); k++ {
			if rest[k] != f.tail[0] || strings.TrimSpace(rest[:k]) == "" {
				continue
			}
			if f.open == "-." {
				if out, ok := dottedTail(rest[k:]); ok {
					return out, true
				}
				continue
			}
			if out, ok := arrow(rest[k:]); ok {
				return out, true
			}
		}
	}
	out, ok := arrow(s)
	if !ok {
		return s, false
	}
	if t := strings.TrimLeft(out, " "); strings.HasPrefix(t, "|") {
		end := strings.Index(t[1:], "|")
		if end < 0 {
			return s, false
		}
		out = t[end+2:]
	}
	return out, true
}

// arrow reads an arrow token: an optional head (<, o, x), a shaft of -, =,
// -.- or ~, and an optional head (>, o, x).
func arrow(s string) (string, bool) {
	k := 0
	if k < len(s) && (s[k] == '<' || s[k] == 'o' || s[k] == 'x') && k+1 < len(s) && (s[k+1] == '-' || s[k+1] == '=') {
		k++
	}
	start := k
	switch {
	case strings.HasPrefix(s[k:], "~~~"):
		for k < len(s) && s[k] == '~' {
			k++
		}
		return s[k:], true
	case strings.HasPrefix(s[k:], "-."):
		k++
		for k < len(s) && s[k] == '.' {
			k++
		}
		if k >= len(s) || s[k] != '-' {
			return s, false
		}
		k++
	case strings.HasPrefix(s[k:], "--"), strings.HasPrefix(s[k:], "=="):
		c := s[k]
		for k < len(s) && s[k] == c {
			k++
		}
	default:
		return s, false
	}
	if k < len(s) && (s[k] == '>' || s[k] == 'o' || s[k] == 'x') {
		// o and x are heads only when no id follows directly (A --xB is
		// not a thing; A --x B is).
		if s[k] == '>' || k+1 == len(s) || s[k+1] == ' ' || s[k+1] == '|' {
			k++
		}
	}
	if k-start < 2 {
		return s, false
	}
	return s[k:], true
}

// dottedTail reads the closing half of -. text .-> : a dot, dashes, an
// optional head.
func dottedTail(s string) (string, bool) {
	if !strings.HasPrefix(s, ".-") {
		return s, false
	}
	k := 1
	for k < len(s) && s[k] == '-' {
		k++
	}
	if k < len(s) && (s[k] == '>' || s[k] == 'o' || s[k] == 'x') {
		k++
	}
	return s[k:], true
}

func isWord(s string) bool {
	for _, r := range s {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_') {
			return false
		}
	}
	return s != ""
}

// --- sequence diagram ------------------------------------------------------

type seqParser struct {
	is     issues
	blocks []seqBlock
}

type seqBlock struct {
	kind string
	line int
}

// seqArrows are the message arrows, longest first.
var seqArrows = []string{"<<-->>", "<<->>", "-->>", "->>", "--x", "-x", "--)", "-)", "-->", "->"}

// seqOpeners open a block closed by end; seqBranches continue one.
var (
	seqOpeners  = map[string]bool{"loop": true, "alt": true, "opt": true, "par": true, "critical": true, "break": true, "rect": true, "box": true}
	seqBranches = map[string]string{"else": "alt", "and": "par", "option": "critical"}
)

func (p *seqParser) parse(header string, lines []string, at int) []mermaidIssue {
	if h := strings.TrimSpace(header); h != "" && h != ";" {
		p.is.add(at+1, "unexpected %s after sequenceDiagram", quote(h))
	}
	for n := at + 1; n < len(lines); n++ {
		for _, st := range statements(lines[n], true) {
			p.statement(n+1, strings.TrimSpace(st))
		}
	}
	for _, b := range p.blocks {
		p.is.add(b.line, "%s is never closed with end", b.kind)
	}
	return p.is
}

func (p *seqParser) statement(line int, st string) {
	if st == "" || strings.HasPrefix(st, "%%") {
		return
	}
	word, rest := st, ""
	if k := strings.IndexAny(st, " \t"); k >= 0 {
		word, rest = st[:k], strings.TrimSpace(st[k:])
	}
	switch {
	case word == "end" && rest == "":
		if len(p.blocks) == 0 {
			p.is.add(line, "end closes no block")
			return
		}
		p.blocks = p.blocks[:len(p.blocks)-1]
		return
	case seqOpeners[word]:
		p.blocks = append(p.blocks, seqBlock{word, line})
		return
	case seqBranches[word] != "":
		if len(p.blocks) == 0 || p.blocks[len(p.blocks)-1].kind != seqBranches[word] {
			p.is.add(line, "%s belongs inside %s … end", word, seqBranches[word])
		}
		return
	case word == "participant" || word == "actor":
		if rest == "" {
			p.is.add(line, "%s needs a name", word)
		}
		return
	case word == "create" || word == "destroy" || word == "activate" || word == "deactivate" || word == "link" || word == "links":
		if rest == "" {
			p.is.add(line, "%s needs a participant", word)
		}
		return
	case word == "autonumber" || word == "title" || strings.HasPrefix(st, "title:") || strings.HasPrefix(st, "accTitle") || strings.HasPrefix(st, "accDescr"):
		return
	case strings.EqualFold(word, "note"):
		p.note(line, rest)
		return
	}
	p.message(line, st)
}

// note reads `left of A: text`, `right of A: text`, `over A[,B]: text`.
func (p *seqParser) note(line int, rest string) {
	colon := strings.Index(rest, ":")
	if colon < 0 {
		p.is.add(line, "a note needs ': text'")
		return
	}
	where := strings.Fields(rest[:colon])
	switch {
	case len(where) >= 3 && (where[0] == "left" || where[0] == "right") && where[1] == "of":
	case len(where) >= 2 && where[0] == "over":
	default:
		p.is.add(line, "a note is placed 'left of X', 'right of X' or 'over X[,Y]', not %s", quote(rest[:colon]))
	}
}

// message reads `A <arrow> [+-]B: text`.
func (p *seqParser) message(line int, st string) {
	colon := strings.Index(st, ":")
	if colon < 0 {
		p.is.add(line, "cannot read %s as a sequence statement — a message is 'A->>B: text'", quote(st))
		return
	}
	head := st[:colon]
	for k := 0; k < len(head); k++ {
		for _, a := range seqArrows {
			if !strings.HasPrefix(head[k:], a) {
				continue
			}
			from := strings.TrimSpace(head[:k])
			to := strings.TrimSpace(head[k+len(a):])
			to = strings.TrimLeft(to, "+-")
			if from == "" || strings.TrimSpace(to) == "" {
				p.is.add(line, "the message %s needs a sender and a receiver", quote(st))
			}
			return
		}
	}
	p.is.add(line, "cannot read %s as a sequence statement — a message is 'A->>B: text'", quote(st))
}
