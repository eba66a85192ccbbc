package hooks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/lazyre"
)

// slot is one declared artifact: a single name or alternatives ("a.md|b.md").
type slot struct {
	names   []string
	present []string
}

func (s slot) label() string { return strings.Join(s.names, ", ") }

// entries normalises a produces-style parameter (string or list).
func entries(v any) []string {
	var out []string
	for _, e := range graph.AsStrings(v) {
		if strings.TrimSpace(e) != "" {
			out = append(out, e)
		}
	}
	return out
}

// resolveSlots resolves produces-style entries against the spec directory.
// It never chooses between present alternatives.
func resolveSlots(a graph.Artifacts, es []string) []slot {
	var out []slot
	for _, e := range es {
		var s slot
		for rest := e; ; {
			p, more, found := strings.Cut(rest, "|")
			if p = strings.TrimSpace(p); p != "" {
				s.names = append(s.names, p)
			}
			if !found {
				break
			}
			rest = more
		}
		if len(s.names) == 0 {
			continue
		}
		for _, n := range s.names {
			if isFile(a, n) {
				s.present = append(s.present, n)
			}
		}
		out = append(out, s)
	}
	return out
}

// isFile reports whether name exists as a regular file.
func isFile(a graph.Artifacts, name string) bool {
	if a == nil || !fs.ValidPath(name) {
		return false
	}
	st, err := fs.Stat(a, name)
	return err == nil && st.Mode().IsRegular()
}

func readText(a graph.Artifacts, name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", fmt.Errorf("invalid artifact name %q", name)
	}
	b, err := readArtifact(a, name, MaxArtifactBytes)
	return string(b), err
}

// MaxArtifactBytes bounds an artifact (or an execution log) a hook reads
// into memory. The agent writes these files; a specification larger than
// this is not one. loop's FileArtifacts refuses the same size unread; the
// hooks check it again so an embedder's graph.Artifacts without a cap
// cannot make a hook read a gigabyte.
const MaxArtifactBytes = 16 << 20

// errTooLarge is readArtifact's refusal; errorKind shows its text.
var errTooLarge = errors.New("larger than a hook reads")

// readArtifact reads name when it is at most limit bytes: the size is
// checked from Stat before the read and from the bytes after it (a file
// that grew in between). A larger file yields an *fs.PathError whose text
// gives the size and the limit.
func readArtifact(a graph.Artifacts, name string, limit int64) ([]byte, error) {
	return readArtifactFrom(a, name, limit, nil)
}

// borrowArtifact is readArtifact through the check's Borrower when a has
// one: the bytes are then valid until the check ends (graph.Borrower), so
// only what is memoised for the check, and copied out of it, may use them.
func borrowArtifact(a graph.Artifacts, name string, limit int64) ([]byte, error) {
	br, _ := a.(graph.Borrower)
	return readArtifactFrom(a, name, limit, br)
}

// readArtifactFrom is readArtifact reading through br when it is not nil.
func readArtifactFrom(a graph.Artifacts, name string, limit int64, br graph.Borrower) ([]byte, error) {
	if st, err := fs.Stat(a, name); err == nil && st.Mode().IsRegular() && st.Size() > limit {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: %d bytes, more than the %d bytes an artifact may have — shorten it (move bulk output such as logs out of the spec directory)", errTooLarge, st.Size(), limit)}
	}
	var b []byte
	var err error
	if br != nil {
		b, err = br.Borrow(name)
	} else {
		b, err = fs.ReadFile(a, name)
	}
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: more than the %d bytes an artifact may have — shorten it (move bulk output such as logs out of the spec directory)", errTooLarge, limit)}
	}
	return b, nil
}

// validateArtifacts checks a node's declared outputs: existence (exactly one
// of alternatives), the front-matter lock, front-matter values, required
// sections, and unticked checkboxes — and reports every finding in one
// block.
func validateArtifacts(_ context.Context, hc *graph.HookContext) graph.HookResult {
	p := hc.Params
	a := hc.Artifacts
	if res, skip := onlyWhenSkipped(hc); skip {
		return res
	}

	own := resolveSlots(a, hc.Node.Produces)
	slots := append(own[:len(own):len(own)], resolveSlots(a, entries(p["validates"]))...)
	checks := p.Bool("locked") || p.Has("frontMatter") || p.Has("sections") || p.Has("checkmarks") || p.Bool("reviewed")
	if len(slots) == 0 {
		if checks {
			r := graph.Block(graph.Finding("this node gates on artifact content but names no artifact to read it from — the graph must declare `produces:` on the node or `validates:` on this hook entry", hc.WorkItem.SpecDir))
			r.Retriable = false
			return r
		}
		return graph.Skip("this node declares no artifacts")
	}
	if hc.Node.Optional {
		consider := own
		if len(consider) == 0 {
			consider = slots
		}
		if !slices.ContainsFunc(consider, func(s slot) bool { return len(s.present) > 0 }) {
			return graph.Skip("optional node; no artifact was produced")
		}
	}

	findings, toRead, planned := presenceFindings(hc, slots)
	for _, name := range toRead {
		findings = append(findings, contentFindings(hc, name)...)
	}
	if len(findings) > 0 {
		return graph.Block(findings...)
	}
	if planned > 0 && len(toRead) == 0 {
		return graph.Skip("artifact(s) authored by a declared-skipped node; absence is planned")
	}
	return graph.Pass(map[string]any{"artifacts": toRead})
}

// onlyWhenSkipped applies the onlyWhenSkipped parameter: the check runs only
// when each named artifact was declared skipped and is absent. skip reports
// whether the hook stops here with res.
func onlyWhenSkipped(hc *graph.HookContext) (res graph.HookResult, skip bool) {
	ows := entries(hc.Params["onlyWhenSkipped"])
	if len(ows) == 0 {
		return graph.HookResult{}, false
	}
	slots := resolveSlots(hc.Artifacts, ows)
	if len(slots) == 0 {
		return graph.Skip("onlyWhenSkipped names no artifact"), true
	}
	for _, s := range slots {
		for _, n := range s.names {
			if !hc.SkippedArtifacts[n] {
				return graph.Skip(s.label() + " was not declared skipped"), true
			}
		}
		if len(s.present) > 0 {
			return graph.Skip(s.label() + " exists; it is gated where it is declared"), true
		}
	}
	return graph.HookResult{}, false
}

// presenceFindings checks that each slot holds exactly one artifact. It
// returns the findings, the artifacts to read, and how many slots are
// absent as planned (authored by a declared-skipped node).
func presenceFindings(hc *graph.HookContext, slots []slot) (findings []graph.Message, toRead []string, planned int) {
	a := hc.Artifacts
	for _, s := range slots {
		switch len(s.present) {
		case 0:
			if !slices.ContainsFunc(s.names, func(n string) bool { return !hc.SkippedArtifacts[n] }) {
				planned++
				continue
			}
			if len(s.names) == 1 {
				findings = append(findings, graph.Finding("required artifact is missing", a.Path(s.names[0])))
			} else {
				findings = append(findings, graph.Finding("required artifact is missing — write one of: "+s.label(), hc.WorkItem.SpecDir))
			}
		case 1:
			toRead = append(toRead, s.present[0])
		default:
			findings = append(findings, graph.Finding(fmt.Sprintf("%d artifacts present where one is expected — keep one of: %s", len(s.present), strings.Join(s.present, ", ")), hc.WorkItem.SpecDir))
		}
	}
	return findings, toRead, planned
}

// contentFindings checks one present artifact against the hook's
// parameters: lock, front matter, sections, review comments, checkmarks
// (the whole artifact's with `complete`, else those under the named
// heading).
func contentFindings(hc *graph.HookContext, name string) []graph.Message {
	p := hc.Params
	// The display path goes into findings only; most artifacts have none.
	path := func() string { return hc.Artifacts.Path(name) }
	doc := loadDoc(hc.Artifacts, name)
	if doc.err != nil {
		return []graph.Message{graph.Finding("artifact could not be read: "+errorKind(doc.err), path())}
	}
	findings := placeholderFindings(doc.text, path())
	fm, body := doc.fm, doc.body
	if p.Bool("locked") {
		status := strings.TrimSpace(fmString(fm["status"]))
		if status != "approved" {
			shown := status
			if shown == "" {
				shown = "(unset)"
			}
			findings = append(findings, graph.Finding("artifact is not locked — front-matter says status: "+shown+", expected status: approved", path()))
		}
	}
	if want := p.Map("frontMatter"); want != nil {
		for _, k := range slices.Sorted(maps.Keys(want)) {
			got := fmString(fm[k])
			exp := fmString(want[k])
			if got != exp {
				findings = append(findings, graph.Finding(fmt.Sprintf("front-matter %s: expected %q, found %q", k, exp, got), path()))
			}
		}
	}
	for _, title := range p.Strings("sections") {
		sec, ok := doc.section(title)
		switch {
		case !ok:
			findings = append(findings, graph.Finding("required section is missing: "+title, path()))
		case sec.Content == "":
			findings = append(findings, graph.Finding("required section is empty: "+title, path()))
		}
	}
	// R5.2: an artifact that passed one of theloop's gates carries the
	// review that passed it; a lost review is a finding. "Passed a gate"
	// is the lock lock-artifacts writes — status: approved with the
	// decision it came from — in the same chain as record-feedback. A
	// lock without `decision:` is the-loop v11's, which kept no review in
	// the document: a repository it walked keeps working unchanged.
	if p.Bool("reviewed") && passedGate(fm) {
		switch sec, ok := doc.section(reviewCommentsSection); {
		case !ok:
			findings = append(findings, graph.Finding("artifact passed its gate but has no ## "+reviewCommentsSection+" section — the review that approved it was lost", path()))
		case sec.Content == "":
			findings = append(findings, graph.Finding("artifact passed its gate but its ## "+reviewCommentsSection+" section is empty — the review that approved it was lost", path()))
		}
	}
	switch want := strings.TrimSpace(p.String("checkmarks")); want {
	case "":
	case checkmarksWhole:
		if n := strings.Count(body, "- [ ]"); n > 0 {
			findings = append(findings, graph.Finding(fmt.Sprintf("%d task(s) still unticked", n), path()))
		}
	default:
		findings = append(findings, sectionCheckmarks(doc, want, path, slices.Contains(p.Strings("sections"), want))...)
	}
	return findings
}

// checkmarksWhole is the checkmarks value that counts the whole artifact
// (the reference's only value).
const checkmarksWhole = "complete"

// sectionCheckmarks checks checkmarks scoped to a heading: every "- [ ]"
// under each section titled title (subsections included) is a finding, and
// so is the heading's absence — naming a heading is asking for it (unless
// listed, when the sections check has said so already). Scoping
// keeps unticked boxes elsewhere in a shared file (the execution log's
// later entries, follow-ups left for later) from reopening a node that was
// satisfied (docs/decisions.md §21).
func sectionCheckmarks(doc *document, title string, path func() string, listed bool) []graph.Message {
	found, open := false, 0
	for _, s := range doc.spans {
		if s.title != title {
			continue
		}
		found = true
		open += strings.Count(doc.body[s.start:s.end], "- [ ]")
	}
	switch {
	case !found && listed:
		return nil
	case !found:
		return []graph.Message{graph.Finding("required section is missing: "+title+" (its checkboxes must all be ticked)", path())}
	case open > 0:
		return []graph.Message{graph.Finding(fmt.Sprintf("%d box(es) still unticked under ## %s", open, title), path())}
	}
	return nil
}

// errorKind describes a read error without echoing paths twice.
func errorKind(err error) string {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	case errors.Is(err, fs.ErrNotExist):
		return "it does not exist"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// enforcesBoundariesFrom blocks when a boundary marker named upstream (e.g.
// "trust boundary" in the requirements) is not answered downstream.
func enforcesBoundariesFrom(_ context.Context, hc *graph.HookContext) graph.HookResult {
	up := entries(hc.Params["upstream"])
	if len(up) == 0 {
		return graph.Skip("no upstream artifact declared")
	}
	var upFiles []string
	for _, s := range resolveSlots(hc.Artifacts, up) {
		upFiles = append(upFiles, s.present...)
	}
	var down []string
	for _, s := range resolveSlots(hc.Artifacts, hc.Node.Produces) {
		down = append(down, s.present...)
	}
	if len(upFiles) == 0 || len(hc.Node.Produces) == 0 {
		return graph.Skip("upstream or downstream artifact absent")
	}
	upDocs := readableDocs(hc.Artifacts, upFiles)
	downDocs := readableDocs(hc.Artifacts, down)
	var msgs []graph.Message
	for _, m := range hc.Params.Strings("markers") {
		lm := strings.ToLower(m)
		if lm == "" {
			continue
		}
		if containsJoined(upDocs, lm) && !containsJoined(downDocs, lm) {
			path := hc.WorkItem.SpecDir
			if len(down) == 1 {
				path = hc.Artifacts.Path(down[0])
			}
			msgs = append(msgs, graph.Finding("boundary named upstream is unanswered here: "+m, path))
		}
	}
	if len(msgs) > 0 {
		return graph.Block(msgs...)
	}
	return graph.Pass(nil)
}

// readableDocs is the readable artifacts among names, in order.
func readableDocs(a graph.Artifacts, names []string) []*document {
	var out []*document
	for _, n := range names {
		if d := loadDoc(a, n); d.err == nil {
			out = append(out, d)
		}
	}
	return out
}

// containsJoined reports whether the lower-cased bodies of docs, joined by
// newlines, contain s (lower case), without building the joined text
// unless s itself spans a newline.
func containsJoined(docs []*document, s string) bool {
	if strings.Contains(s, "\n") {
		parts := make([]string, len(docs))
		for i, d := range docs {
			parts[i] = d.lowerBody()
		}
		return strings.Contains(strings.Join(parts, "\n"), s)
	}
	for _, d := range docs {
		if d.containsLower(s) {
			return true
		}
	}
	return false
}

// mermaidTypes are the diagram keywords a mermaid block may start with.
var mermaidTypes = []string{"flowchart", "graph", "sequenceDiagram", "stateDiagram", "stateDiagram-v2", "classDiagram", "erDiagram", "journey", "gantt", "pie", "mindmap", "timeline", "gitGraph", "quadrantChart", "C4Context", "block-beta"}

var backtickInLabel = lazyre.New("\\[\\s*\"[^\"\\n]*`")

// lintArtifacts checks the node's artifacts: every mermaid block parses
// (flowchart and sequence diagrams by a parser of their common subset,
// other diagram types by their keyword — mermaid.go), optional line length, and the built-in markdown
// structure lint (an unclosed code fence swallows the rest of the document).
// A configured external linter runs only in live mode (never under check).
func lintArtifacts(ctx context.Context, hc *graph.HookContext) graph.HookResult {
	var files []string
	for _, s := range resolveSlots(hc.Artifacts, hc.Node.Produces) {
		files = append(files, s.present...)
	}
	if len(files) == 0 {
		return graph.Skip("no artifacts to lint")
	}
	diagrams := true
	if b := hc.Params.BoolPtr("diagrams"); b != nil {
		diagrams = *b
	}
	structure := true
	if b := hc.Params.BoolPtr("structure"); b != nil {
		structure = *b
	}
	maxLen := hc.Params.Int("maxLineLength", 0)
	var msgs []graph.Message
	for _, f := range files {
		d := loadDoc(hc.Artifacts, f)
		text := d.text
		if d.err != nil {
			path := hc.Artifacts.Path(f)
			msgs = append(msgs, graph.Finding("artifact could not be read: "+errorKind(d.err), path))
			continue
		}
		var problems []string
		if diagrams {
			problems = append(problems, lintMermaid(text)...)
		}
		if maxLen > 0 {
			problems = append(problems, lintLineLength(text, maxLen)...)
		}
		if structure {
			problems = append(problems, lintStructure(text)...)
		}
		if len(problems) > 0 {
			path := hc.Artifacts.Path(f)
			for _, m := range problems {
				msgs = append(msgs, graph.Finding(m, path))
			}
		}
		msgs = append(msgs, placeholderFindings(text, hc.Artifacts.Path(f))...)
	}
	var linterNote string
	if hc.Params.Has("linter") && len(msgs) == 0 {
		argv, err := commandArgv(hc.Params["linter"])
		if err != nil || len(argv) == 0 {
			r := graph.Block(graph.Finding("the markdown linter declared in the graph cannot be parsed", ""))
			r.Retriable = false
			return r
		}
		if hc.Mode == graph.ModeCheck {
			// Like verify-tests: check never starts a program. The built-in
			// checks above still ran.
			linterNote = "the markdown linter " + argv[0] + " is not run under check (check never starts a program)"
		} else if r, done := runLinter(ctx, hc, hc.Commands, argv, files); done {
			return r
		}
	} else if v, ok := hc.Config["markdownLinter"]; ok && len(msgs) == 0 {
		// The repository's own linter (harness config tooling.lint.markdown)
		// is the repository's program: it runs like its test command,
		// through RepoCommands on the agent's side, never in loopd.
		argv, err := commandArgv(v)
		switch {
		case err != nil || len(argv) == 0:
			linterNote = "tooling.lint.markdown cannot be parsed; the markdown linter is not run"
		case hc.Mode == graph.ModeCheck:
			linterNote = "the markdown linter " + argv[0] + " (tooling.lint.markdown) is not run under check (check never starts a program)"
		case hc.RepoCommands == nil:
			linterNote = "the markdown linter " + argv[0] + " (tooling.lint.markdown) runs on the agent's claim, not here"
		default:
			if r, done := runLinter(ctx, hc, hc.RepoCommands, argv, files); done {
				return r
			}
		}
	}
	if len(msgs) > 0 {
		return graph.Block(msgs...)
	}
	if linterNote != "" {
		r := graph.Pass(map[string]any{"linted": files, "linter": "not run under check"})
		r.Messages = []graph.Message{{Text: linterNote, Severity: graph.SeverityInfo}}
		return r
	}
	return graph.Pass(map[string]any{"linted": files})
}

// runLinter runs the graph's markdown linter over the artifacts through the
// command runner (from the repository root, no shell). It reports done
// with the blocking result when the linter did not pass.
func runLinter(ctx context.Context, hc *graph.HookContext, runner graph.Commands, argv, files []string) (graph.HookResult, bool) {
	if runner == nil {
		return graph.Block(graph.Finding("the markdown linter is configured but no command runner is available", "")), true
	}
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = hc.Artifacts.Path(f)
	}
	res, err := runner.Run(ctx, append(argv[:len(argv):len(argv)], paths...), "")
	switch {
	case errors.Is(err, graph.ErrCommandNotFound):
		r := graph.Block(graph.Finding("markdown linter not found: "+argv[0], ""))
		r.Retriable = false
		return r, true
	case err != nil:
		return graph.Block(graph.Finding("markdown linter did not finish: "+argv[0], "")), true
	case res.ExitCode != 0:
		out := append([]graph.Message{graph.Finding(fmt.Sprintf("markdown linter %s reported problems, exit %d", argv[0], res.ExitCode), "")}, tailLines(res.Stdout, res.Stderr, 20)...)
		return graph.Block(out...), true
	}
	return graph.HookResult{}, false
}

// lintMermaid parses every closed mermaid block (mermaid.go: flowchart and
// sequence diagrams statement by statement, other types by keyword) and
// reports each problem with the block's number and the line within it. A
// block opens on a line whose trimmed text starts with "```mermaid" and
// closes on the next line whose trimmed text starts with "```"; an unclosed
// block ends the scan. Only the blocks' own lines are split: the rest of
// the artifact is skipped by searching for the markers.
func lintMermaid(text string) []string {
	var out []string
	idx := 0
	for off := 0; ; {
		_, body := markedLine(text, off, "```mermaid", onlySpace)
		if body < 0 {
			break
		}
		end, next := markedLine(text, body, "```", onlySpace)
		if end < 0 {
			break // an unclosed block is not a diagram
		}
		idx++
		var block []string
		if body < end {
			block = strings.Split(text[body:end-1], "\n")
		}
		out = append(out, mermaidFindings(idx, block)...)
		off = next
	}
	return out
}

// mermaidFindings are the problems of the idx-th mermaid block (its lines
// between the fences): its grammar's, then backticks in node labels.
func mermaidFindings(idx int, block []string) []string {
	var out []string
	for _, is := range parseMermaid(block) {
		if is.line == 0 || strings.HasPrefix(is.text, "does not start with") {
			out = append(out, fmt.Sprintf("mermaid block %d %s", idx, is.text))
			continue
		}
		out = append(out, fmt.Sprintf("mermaid block %d line %d: %s", idx, is.line, is.text))
	}
	for n, l := range block {
		if backtickInLabel.MatchString(l) {
			out = append(out, fmt.Sprintf("mermaid block %d line %d: a backtick inside a node label breaks rendering — use plain text", idx, n+1))
		}
	}
	return out
}

// markedLine finds the first line at or after off (a line start) that
// starts with marker after a prefix lead accepts. It returns that line's
// start and the start of the line after it (len(text)+1 after the last
// line), or -1, -1. It searches for the marker rather than walking lines:
// most of an artifact holds none.
func markedLine(text string, off int, marker string, lead func(string) bool) (at, next int) {
	for off <= len(text) {
		i := strings.Index(text[off:], marker)
		if i < 0 {
			return -1, -1
		}
		i += off
		start := strings.LastIndexByte(text[:i], '\n') + 1
		next = len(text) + 1
		if nl := strings.IndexByte(text[i:], '\n'); nl >= 0 {
			next = i + nl + 1
		}
		if lead(text[start:i]) {
			return start, next
		}
		off = next
	}
	return -1, -1
}

// onlySpace accepts the prefix strings.TrimSpace removes.
func onlySpace(s string) bool { return strings.TrimLeftFunc(s, unicode.IsSpace) == "" }

// onlyBlanks accepts the prefix isFence skips: spaces and tabs.
func onlyBlanks(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != ' ' && s[i] != '\t' {
			return false
		}
	}
	return true
}

func lintLineLength(text string, limit int) []string {
	var out []string
	inFence := false
	for i, l := range strings.Split(text, "\n") {
		if isFence(l) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if len([]rune(l)) > limit && strings.Contains(strings.TrimSpace(l), " ") {
			out = append(out, fmt.Sprintf("line %d exceeds %d characters", i+1, limit))
		}
	}
	return out
}

// lintStructure is the built-in markdown structure lint: problems that
// break how the document renders for its reviewer.
func lintStructure(text string) []string {
	var out []string
	open := -1 // where the line of the fence left open starts
	for off := 0; ; {
		at, next := markedLine(text, off, "```", onlyBlanks)
		if at < 0 {
			break
		}
		if open < 0 {
			open = at
		} else {
			open = -1
		}
		off = next
	}
	if open >= 0 {
		out = append(out, fmt.Sprintf("line %d opens a code fence that is never closed — everything after it renders as code", strings.Count(text[:open], "\n")+1))
	}
	return out
}

// passedGate reports whether front matter carries the lock theloop writes
// at an approval gate: status: approved and the decision it came from.
func passedGate(fm map[string]any) bool {
	return strings.TrimSpace(fmString(fm["status"])) == "approved" && strings.TrimSpace(fmString(fm["decision"])) != ""
}

// reviewCommentsSection is the heading record-feedback appends reviews
// under and validate-artifacts' `reviewed` requires (R5.2).
const reviewCommentsSection = "Review comments"
