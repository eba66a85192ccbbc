package hooks

import (
	"context"
	"strings"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/lazyre"
)

// GoalMarker identifies the goal-request comment of the contribution loop.
const GoalMarker = "<!-- the-loop:goal-request -->"

const decisionGoal = "goal-definition"

var (
	goalLine     = lazyre.New(`(?im)^[#>*_ \t]*goal(?:\*\*|__)?[ \t]*:[ \t]*(?:\*\*|__)?[ \t]*(.*\S)[ \t]*$`)
	criteriaLine = lazyre.New(`(?i)^[#>*_ \t]*success criteria[ \t]*:?[ \t]*(?:\*\*|__)?[ \t]*$`)
	bulletLine   = lazyre.New(`^[ \t]*[-*][ \t]+(?:\[[ xX]\][ \t]*)?(.*\S)[ \t]*$`)
)

// Goal is a contribution's stated goal.
type Goal struct {
	Goal     string   `json:"goal"`
	Criteria []string `json:"criteria"`
	By       string   `json:"by"`
}

// ParseGoal reads "Goal: ..." plus a "Success criteria:" bullet list from
// one comment body. Both are required.
func ParseGoal(body string) (Goal, bool) {
	m := goalLine.FindStringSubmatch(body)
	if m == nil {
		return Goal{}, false
	}
	g := Goal{Goal: strings.TrimSpace(strings.Trim(strings.TrimSpace(m[1]), "*_"))}
	if g.Goal == "" {
		return Goal{}, false
	}
	lines := strings.Split(body, "\n")
	start := -1
	for i, l := range lines {
		if criteriaLine.MatchString(strings.TrimRight(l, "\r")) {
			start = i + 1
			break
		}
	}
	if start < 0 {
		return Goal{}, false
	}
	for _, l := range lines[start:] {
		l = strings.TrimRight(l, "\r")
		if strings.TrimSpace(l) == "" {
			if len(g.Criteria) > 0 {
				break
			}
			continue
		}
		b := bulletLine.FindStringSubmatch(l)
		if b == nil {
			break
		}
		g.Criteria = append(g.Criteria, strings.TrimSpace(b[1]))
	}
	if len(g.Criteria) == 0 {
		return Goal{}, false
	}
	return g, true
}

// findGoal returns the last parseable goal among the thread (live mode only)
// and the event's authorized comments.
func findGoal(ctx context.Context, hc *graph.HookContext) (Goal, bool) {
	allowed := map[string]bool{}
	for _, u := range hc.Config.Strings(configAuthUsers) {
		allowed[strings.TrimPrefix(u, "@")] = true
	}
	var candidates []graph.Comment
	if hc.Mode == graph.ModeLive {
		if cs, err := listComments(ctx, hc); err == nil {
			for _, c := range cs {
				if !SelfAuthored(c.Body) && allowed[strings.TrimPrefix(c.Author, "@")] {
					candidates = append(candidates, c)
				}
			}
		}
	}
	candidates = append(candidates, authorizedComments(hc)...)
	for i := len(candidates) - 1; i >= 0; i-- {
		if g, ok := ParseGoal(candidates[i].Body); ok {
			g.By = "@" + strings.TrimPrefix(candidates[i].Author, "@")
			return g, true
		}
	}
	return Goal{}, false
}

// postGoalRequest asks, once, what the contribution should achieve.
func postGoalRequest(ctx context.Context, hc *graph.HookContext) graph.HookResult {
	if _, ok := findGoal(ctx, hc); ok {
		return graph.Pass(map[string]any{"posted": false, "reason": "goal already stated"})
	}
	if cs, err := listComments(ctx, hc); err == nil {
		for _, c := range cs {
			if strings.Contains(c.Body, GoalMarker) {
				return graph.Pass(map[string]any{"posted": false, "reason": "already asked"})
			}
		}
	}
	body := "🤖 _the-loop_ — **what should this contribution achieve?**\n\nReply in one comment, in this shape:\n\n```\nGoal: <one sentence>\nSuccess criteria:\n- [ ] <how we will know it is done>\n- [ ] <another>\n```\n\n" + GoalMarker + "\n"
	if _, err := postComment(ctx, hc, body); err != nil {
		return sideEffect(err, map[string]any{"posted": false}, "no ticket integration configured; the goal request was not posted")
	}
	return graph.Pass(map[string]any{"posted": true})
}

// classifyGoal records the contribution's goal from an authorized comment.
func classifyGoal(ctx context.Context, hc *graph.HookContext) graph.HookResult {
	if _, ok := hc.Decisions[decisionGoal]; ok {
		return decided("defined", graph.DecisionFact{Key: decisionGoal}, nil)
	}
	g, ok := findGoal(ctx, hc)
	if !ok {
		return graph.Wait("waiting for an authorized comment stating `Goal: …` and a `Success criteria:` bullet list in one comment")
	}
	var b strings.Builder
	b.WriteString("🤖 _the-loop_ — **goal recorded**\n\n> **Goal:** " + g.Goal + "\n>\n")
	for _, c := range g.Criteria {
		b.WriteString("> - [ ] " + c + "\n")
	}
	b.WriteString("\nRecorded from " + g.By + ".\n")
	res := decided("defined", graph.DecisionFact{Key: decisionGoal, Goal: map[string]any{"goal": g.Goal, "criteria": g.Criteria, "by": g.By}, By: g.By}, nil)
	if _, err := postComment(ctx, hc, b.String()); err != nil {
		res.Degraded = sideEffect(err, nil, "").Degraded
	}
	return res
}

var (
	completionPhrases = []string{"all done", "we're done", "we are done", "that's all", "thats all", "nothing else", "no more", "all set", "close it", "close this", "lgtm", "looks good", "ship it", "approved", "done"}
	negatorWord       = lazyre.New(`(?i)\b(not|isn't|isnt|aren't|arent|nope|no)\b`)
)

// phraseAt reports the positions where phrase occurs as a whole phrase (not
// preceded or followed by a word character or '-').
func phraseAt(text, phrase string) []int {
	var out []int
	for i := 0; ; {
		j := strings.Index(text[i:], phrase)
		if j < 0 {
			return out
		}
		at := i + j
		end := at + len(phrase)
		beforeOK := at == 0 || !isWordByte(text[at-1])
		afterOK := end == len(text) || !isWordByte(text[end])
		if beforeOK && afterOK {
			out = append(out, at)
		}
		i = at + 1
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// DeclaresDone reports whether an ad-hoc reply declares the work complete.
// A negator within 40 characters before a completion phrase (no sentence
// break between) overrides it: "not done yet" is more work.
func DeclaresDone(body string) bool {
	text := strings.ToLower(body)
	done := false
	for _, p := range completionPhrases {
		for _, at := range phraseAt(text, p) {
			from := at - 40
			if from < 0 {
				from = 0
			}
			window := text[from:at]
			if k := strings.LastIndexAny(window, ".!?\n"); k >= 0 {
				window = window[k+1:]
			}
			if negatorWord.MatchString(window) {
				return false
			}
			done = true
		}
	}
	return done
}

// classifyAdhocReply decides the ad-hoc review from the newest authorized
// reply: done, or more work. It never waits once a reply exists.
func classifyAdhocReply(_ context.Context, hc *graph.HookContext) graph.HookResult {
	cs := authorizedComments(hc)
	if len(cs) == 0 {
		return graph.Wait("no authorized reply yet")
	}
	last := cs[len(cs)-1]
	outcome := "more-work"
	if DeclaresDone(last.Body) {
		outcome = "done"
	}
	return decided(outcome, graph.DecisionFact{By: authors([]graph.Comment{last}), Comment: last.ID}, map[string]any{"comments": commentData([]graph.Comment{last})})
}
