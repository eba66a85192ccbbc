package hooks

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"github.com/theloop-dev/theloop/graph"
)

// Gate outcomes of classify-feedback. The set is closed: nothing a comment
// says can produce any other value.
const (
	OutcomeApproved             = "approved"
	OutcomeApprovedWithComments = "approved-with-comments"
	OutcomeChangesRequested     = "changes-requested"
)

// verdict phrases, as word sequences.
var (
	changesPhrases = [][]string{
		{"changes", "requested"}, {"request", "changes"}, {"requesting", "changes"}, {"requested", "changes"},
		{"please", "change"}, {"rejected"}, {"i", "reject"}, {"needs", "changes"}, {"needs", "work"},
		{"need", "changes"},
	}
	approvePhrases = [][]string{
		{"approved"}, {"i", "approve"}, {"approving"}, {"lgtm"}, {"looks", "good"}, {"ship", "it"}, {"signed", "off"},
	}
	commentWords = map[string]bool{"but": true, "nit": true, "nits": true, "nitpick": true, "suggestion": true, "suggest": true, "consider": true, "minor": true, "however": true, "though": true}
	negators     = map[string]bool{"not": true, "no": true, "never": true, "don't": true, "dont": true, "isn't": true, "isnt": true, "aren't": true, "arent": true, "can't": true, "cant": true, "cannot": true, "won't": true, "wont": true, "nope": true, "without": true, "neither": true, "nor": true, "hardly": true, "doesn't": true, "doesnt": true, "wouldn't": true, "wouldnt": true, "shouldn't": true, "shouldnt": true}
)

// sentence is a run of lower-cased words; question marks the ones that end
// in "?" (a question is never a verdict).
type sentence struct {
	words    []string
	question bool
}

// sentenceWords splits text into sentences of lower-cased words (letters,
// digits and apostrophes). Sentences end at . ! ? ; , : and line breaks.
func sentenceWords(text string) []sentence {
	text = strings.ToLower(strings.ReplaceAll(text, "’", "'"))
	var out []sentence
	var cur []string
	var w strings.Builder
	flushWord := func() {
		if w.Len() > 0 {
			cur = append(cur, strings.Trim(w.String(), "'"))
			w.Reset()
		}
	}
	flushSentence := func(question bool) {
		flushWord()
		if len(cur) > 0 {
			out = append(out, sentence{words: cur, question: question})
			cur = nil
		}
	}
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'':
			w.WriteRune(r)
		case r == '?':
			flushSentence(true)
		case r == '.' || r == '!' || r == ';' || r == ',' || r == ':' || r == '\n':
			// Clause breaks bound negation: "no changes requested, approved".
			flushSentence(false)
		default:
			flushWord()
		}
	}
	flushSentence(false)
	return out
}

// findPhrase reports whether phrase occurs in words, and whether every
// occurrence is negated (a negator within the three words before it).
func findPhrase(words, phrase []string) (found, negated bool) {
	negated = true
	for i := 0; i+len(phrase) <= len(words); i++ {
		match := true
		for j, p := range phrase {
			if words[i+j] != p {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		found = true
		neg := false
		for k := i - 1; k >= 0 && k >= i-3; k-- {
			if negators[words[k]] {
				neg = true
				break
			}
		}
		if !neg {
			negated = false
		}
	}
	if !found {
		negated = false
	}
	return found, negated
}

// Classify reads a reviewer's text and returns one of the three gate
// outcomes, or "" when the text is not decisive. Matching is by whole words
// and negation-safe: "not approved", "don't ship it" and "I can't approve
// this" never approve (they wait: rejecting takes an explicit request for
// changes); a negated request for changes ("no changes requested") is not a
// request; a question ("approved?") is not a verdict. An approval that carries remarks ("but",
// "nit", "consider", ...) or several comments is approved-with-comments.
func Classify(bodies []string) string {
	changes, approve, remarks := false, false, false
	for _, body := range bodies {
		for _, s := range sentenceWords(body) {
			if s.question {
				continue
			}
			for _, p := range changesPhrases {
				if f, neg := findPhrase(s.words, p); f && !neg {
					changes = true
				}
			}
			for _, p := range approvePhrases {
				if f, neg := findPhrase(s.words, p); f && !neg {
					approve = true
				}
			}
			for _, w := range s.words {
				if commentWords[w] {
					remarks = true
				}
			}
		}
	}
	switch {
	case changes:
		return OutcomeChangesRequested
	case approve && (remarks || len(bodies) > 1):
		return OutcomeApprovedWithComments
	case approve:
		return OutcomeApproved
	}
	return ""
}

// classifyFeedback resolves an approval gate from the authorized comments of
// the inbound event. No authorized comment, or indecisive text, waits.
func classifyFeedback(_ context.Context, hc *graph.HookContext) graph.HookResult {
	cs := authorizedComments(hc)
	if len(cs) == 0 {
		return graph.Wait("no authorized feedback yet")
	}
	bodies := make([]string, len(cs))
	for i, c := range cs {
		bodies[i] = c.Body
	}
	outcome := Classify(bodies)
	// A submitted review's verdict decides as its words would: the last
	// review with one wins over the text.
	for i := len(cs) - 1; i >= 0; i-- {
		switch cs[i].Verdict {
		case OutcomeApproved:
			outcome = OutcomeApproved
			if body := strings.TrimSpace(cs[i].Body); body != "" && Classify([]string{body}) != OutcomeApproved {
				outcome = OutcomeApprovedWithComments // the reviewer's words are remarks
			}
		case OutcomeChangesRequested:
			outcome = OutcomeChangesRequested
		default:
			continue
		}
		break
	}
	if outcome == "" {
		return graph.Wait("feedback so far is not decisive; the gate stays open")
	}
	last := cs[len(cs)-1]
	return decided(outcome, graph.DecisionFact{By: authors(cs), Rule: rules(cs), Comment: last.ID}, map[string]any{"comments": commentData(cs)})
}

// lastClassification returns the most recent decisive gate result earlier
// in this chain.
func lastClassification(hc *graph.HookContext) (graph.HookResult, bool) {
	for i := len(hc.Results) - 1; i >= 0; i-- {
		r := hc.Results[i]
		if _, ok := r.Data["comments"]; ok && r.Status == graph.StatusPass {
			return r, true
		}
	}
	return graph.HookResult{}, false
}

// resultComments decodes the comments of a classification result.
func resultComments(r graph.HookResult) []graph.Comment {
	var out []graph.Comment
	switch cs := r.Data["comments"].(type) {
	case []any:
		for _, e := range cs {
			v := graph.AsValues(e)
			out = append(out, graph.Comment{ID: v.String("id"), Author: v.String("author"), Body: v.String("body")})
		}
	case []graph.Comment:
		out = cs
	}
	return out
}

// lockArtifacts writes `status: approved` and `approvedBy` into the front
// matter of the gated artifacts after an approving verdict in the same chain,
// re-reads each file and blocks when the change did not land. The agent is
// never the one that sets the lock.
func lockArtifacts(_ context.Context, hc *graph.HookContext) graph.HookResult {
	cls, ok := lastClassification(hc)
	if !ok {
		return graph.Skip("no verdict to lock on")
	}
	outcome := cls.Outcome()
	if outcome != OutcomeApproved && outcome != OutcomeApprovedWithComments {
		return graph.Skip("the verdict is " + outcome + "; nothing is locked")
	}
	es := entries(hc.Params["artifacts"])
	if len(es) == 0 {
		es = entries(hc.Params["artifact"])
	}
	if len(es) == 0 {
		r := graph.Block(graph.Finding("lock-artifacts names no artifact — the graph must declare `artifacts:` on this hook entry", hc.WorkItem.SpecDir))
		r.Retriable = false
		return r
	}
	var approvers []string
	for _, c := range resultComments(cls) {
		approvers = append(approvers, "@"+strings.TrimPrefix(c.Author, "@"))
	}
	approvers = dedupe(approvers)
	// The lock names the decision it comes from; the runtime records (and
	// signs) that decision when this chain passes, at the same instant.
	decision := graph.DecisionRef(hc.Node.ID, decider(cls).Comment, hc.Now)
	var findings []graph.Message
	var locked []string
	for _, s := range resolveSlots(hc.Artifacts, es) {
		switch len(s.present) {
		case 0:
			all := true
			for _, n := range s.names {
				if !hc.SkippedArtifacts[n] {
					all = false
				}
			}
			if !all {
				findings = append(findings, graph.Finding("cannot lock: the approved artifact is missing — write one of: "+s.label(), hc.WorkItem.SpecDir))
			}
			continue
		case 1:
		default:
			findings = append(findings, graph.Finding("cannot lock: more than one of "+s.label()+" is present", hc.WorkItem.SpecDir))
			continue
		}
		name := s.present[0]
		path := hc.Artifacts.Path(name)
		text, err := readText(hc.Artifacts, name)
		if err != nil {
			findings = append(findings, graph.Finding("cannot lock: artifact could not be read: "+errorKind(err), path))
			continue
		}
		out, ok := SetFrontMatterLockFor(text, approvers, decision)
		if !ok {
			findings = append(findings, graph.Finding("cannot lock: the front matter is not a YAML mapping theloop can edit; fix it so `status: approved` can be written", path))
			continue
		}
		if err := hc.Artifacts.WriteFile(name, []byte(out)); err != nil {
			findings = append(findings, graph.Finding("cannot lock: artifact could not be written: "+errorKind(err), path))
			continue
		}
		back, err := readText(hc.Artifacts, name)
		fm, _ := FrontMatter(back)
		if err != nil || strings.TrimSpace(fmString(fm["status"])) != "approved" {
			findings = append(findings, graph.Finding("the lock did not land: front matter does not read status: approved after writing", path))
			continue
		}
		locked = append(locked, name)
	}
	if len(findings) > 0 {
		return graph.Block(findings...)
	}
	return graph.Pass(map[string]any{"locked": locked, "approvedBy": approvers})
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// SetFrontMatterLock returns text with `status: approved` and
// `approvedBy: [...]` in its front matter, editing those keys in place and
// keeping every other line; a document without front matter gets one. It
// reports false — and changes nothing — when the existing front matter is
// unterminated, not valid YAML, not a mapping, or cannot be edited line by
// line into one that reads approved: a human must fix it first.
func SetFrontMatterLock(text string, approvers []string) (string, bool) {
	return SetFrontMatterLockFor(text, approvers, "")
}

// SetFrontMatterLockFor is SetFrontMatterLock that also writes
// `decision: <ref>` (graph.DecisionRef) naming the recorded decision the
// lock comes from; an empty ref writes no decision key.
func SetFrontMatterLockFor(text string, approvers []string, decision string) (string, bool) {
	by := "[" + strings.Join(quoteAll(approvers), ", ") + "]"
	decisionLine := ""
	if decision != "" {
		decisionLine = "decision: " + quoteAll([]string{decision})[0]
	}
	if !strings.HasPrefix(text, "---") {
		head := "---\nstatus: approved\napprovedBy: " + by + "\n"
		if decisionLine != "" {
			head += decisionLine + "\n"
		}
		return head + "---\n" + text, true
	}
	lines := strings.Split(text, "\n")
	end := -1
	for i := 1; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "---" {
			end = i
			break
		}
	}
	if end < 0 {
		return text, false
	}
	if _, ok := parseYAMLMapping(strings.Join(lines[1:end], "\n")); !ok {
		return text, false
	}
	if fm, _ := FrontMatter(text); len(fm) == 0 && strings.TrimSpace(strings.Join(lines[1:end], "\n")) != "" {
		return text, false // valid YAML, but not a mapping
	}
	head := make([]string, 0, end+2)
	sawStatus, sawBy, sawDecision := false, false, false
	for i := 1; i < end; i++ {
		l := lines[i]
		switch topLevelKey(l) {
		case "decision":
			if decisionLine != "" {
				head = append(head, decisionLine)
				sawDecision = true
				continue
			}
		case "status":
			head = append(head, "status: approved")
			sawStatus = true
			continue
		case "approvedBy":
			head = append(head, "approvedBy: "+by)
			sawBy = true
			// drop the block list that followed the key
			for i+1 < end && strings.HasPrefix(strings.TrimLeft(lines[i+1], " "), "- ") {
				i++
			}
			continue
		}
		head = append(head, l)
	}
	if !sawStatus {
		head = append(head, "status: approved")
	}
	if !sawBy {
		head = append(head, "approvedBy: "+by)
	}
	if decisionLine != "" && !sawDecision {
		head = append(head, decisionLine)
	}
	out := "---\n" + strings.Join(head, "\n") + "\n" + strings.Join(lines[end:], "\n")
	if fm, _ := FrontMatter(out); strings.TrimSpace(fmString(fm["status"])) != "approved" {
		return text, false
	}
	return out, true
}

func topLevelKey(line string) string {
	if line == "" || line[0] == ' ' || line[0] == '\t' || line[0] == '#' {
		return ""
	}
	k, _, ok := strings.Cut(line, ":")
	if !ok {
		return ""
	}
	return strings.TrimSpace(k)
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// recordFeedback appends the review that resolved the gate, attributed and
// dated, to the artifact's "## Review comments" section, never rewriting
// earlier entries.
func recordFeedback(_ context.Context, hc *graph.HookContext) graph.HookResult {
	decl := hc.Params.String("into")
	if decl == "" {
		return graph.Skip("no target artifact declared")
	}
	// `into` may name alternatives (requirements.md|bugfix.md): the review
	// goes into the one that exists.
	into := ""
	for _, s := range resolveSlots(hc.Artifacts, []string{decl}) {
		if len(s.present) == 1 {
			into = s.present[0]
		}
	}
	if into == "" {
		return graph.Skip(decl + " does not exist")
	}
	cls, ok := lastClassification(hc)
	if !ok {
		return graph.Skip("no feedback to record")
	}
	cs := resultComments(cls)
	if len(cs) == 0 {
		return graph.Skip("no feedback to record")
	}
	outcome := cls.Outcome()
	if outcome == "" || outcome == string(graph.StatusPass) {
		outcome = "reviewed"
	}
	text, err := readText(hc.Artifacts, into)
	if err != nil {
		return graph.Block(graph.Finding("the review could not be recorded: artifact could not be read: "+errorKind(err), hc.Artifacts.Path(into)))
	}
	parts := []string{"### " + hc.Now.Format("2006-01-02") + " — " + outcome}
	for _, c := range cs {
		body := strings.TrimSpace(scrubbed(hc.Artifacts, c.Body))
		if body == "" {
			parts = append(parts, "**@"+c.Author+"** left no comment text.")
			continue
		}
		parts = append(parts, "**@"+c.Author+"** wrote:", body)
	}
	block := strings.Join(parts, "\n\n")
	out := strings.TrimRight(text, "\n")
	if strings.Contains(out, "## Review comments") {
		out += "\n\n" + block + "\n"
	} else {
		out += "\n\n## Review comments\n\n" + block + "\n"
	}
	if err := hc.Artifacts.WriteFile(into, []byte(out)); err != nil {
		return graph.Block(graph.Finding("the review could not be recorded: "+errorKind(err), hc.Artifacts.Path(into)))
	}
	return graph.Pass(map[string]any{"recorded": len(cs), "artifact": into})
}

// textScrubber is Artifacts that cleans credentials out of text a person
// typed before it is written into the checkout (loop.FileArtifacts, given
// the process's scrubber).
type textScrubber interface{ ScrubText(string) string }

// scrubbed is s as it may be written into arts: a reviewer who pasted a
// token into a comment must not have it committed into the artifact.
func scrubbed(arts graph.Artifacts, s string) string {
	if sc, ok := arts.(textScrubber); ok {
		return sc.ScrubText(s)
	}
	return s
}

// recordDecision appends the decision this chain reached to the execution
// log (### <date> — decision at <node>: <outcome>, by whom), so the paper
// trail reads without graph-state.json.
func recordDecision(_ context.Context, hc *graph.HookContext) graph.HookResult {
	into := hc.Params.StringOr("into", "execution-log.md")
	var decided *graph.HookResult
	for i := len(hc.Results) - 1; i >= 0; i-- {
		if hc.Results[i].Route != "" && hc.Results[i].Status == graph.StatusPass {
			decided = &hc.Results[i]
			break
		}
	}
	if decided == nil {
		return graph.Skip("no decision in this chain")
	}
	if !isFile(hc.Artifacts, into) {
		return graph.Skip(into + " does not exist")
	}
	by := decider(*decided).By
	line := fmt.Sprintf("\n### %s — decision at %s\n\n- **Outcome:** %s\n", hc.Now.Format("2006-01-02"), hc.Node.ID, decided.Outcome())
	if by != "" {
		line += "- **By:** " + by + "\n"
	}
	if hc.Event != nil && hc.Event.ID != "" {
		line += "- **Event:** " + hc.Event.ID + "\n"
	}
	if err := hc.Artifacts.AppendFile(into, []byte(line)); err != nil {
		return degraded(map[string]any{"appended": false}, "could not append to "+into+": "+errorKind(err))
	}
	return graph.Pass(map[string]any{"appended": true})
}
