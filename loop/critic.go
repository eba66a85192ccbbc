package loop

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/harness"
)

// A critic is a second opinion the critic nodes (design-critic-review,
// critic-review) ask for: another harness or another model, run once,
// non-interactively, on the work item's artifacts. The repository names its
// critics in .the-loop/harness-config.yaml:
//
//	reviews:
//	  critics:
//	    opus:   {harness: claude, model: opus}
//	    gemini: {harness: gemini, timeoutSeconds: 900}
//
// `loopctl critic run NAME --work-item ID` builds the prompt, runs the
// critic and records its review in execution-log.md under the section the
// node's exit chain requires — never in an approved artifact, whose locked
// bytes a signed decision covers.

// Critic is one configured critic.
type Critic struct {
	Name    string `json:"name"`
	Harness string `json:"harness"`
	Model   string `json:"model,omitempty"`
	// Timeout bounds one run (default DefaultCriticTimeout).
	Timeout time.Duration `json:"timeoutSeconds"`
}

// DefaultCriticTimeout bounds a critic run unless the critic sets
// timeoutSeconds.
const DefaultCriticTimeout = 10 * time.Minute

// CriticHarnesses are the harnesses a critic may run: every registered
// one, in alphabetical order.
func CriticHarnesses() []string { return harness.SortedNames() }

// Critics reads reviews.critics from the harness config: each entry needs
// a known harness; a bad entry is left out with a warning naming it.
func Critics(h HarnessConfig) ([]Critic, []string) {
	reviews, _ := h.Raw["reviews"].(map[string]any)
	raw, ok := reviews["critics"].(map[string]any)
	if !ok {
		return nil, nil
	}
	var out []Critic
	var warns []string
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		v := graph.AsValues(raw[name])
		file := h.Path
		if file == "" {
			file = HarnessConfigFile
		}
		where := fmt.Sprintf("%s: reviews.critics.%s", file, name)
		if v == nil {
			warns = append(warns, where+" is not a mapping; e.g. {harness: claude, model: opus}")
			continue
		}
		c := Critic{Name: name, Harness: v.String("harness"), Model: v.String("model"), Timeout: DefaultCriticTimeout}
		if !validCriticName(name) {
			warns = append(warns, where+": a critic's name is letters, digits, - and _")
			continue
		}
		if !harness.Known(c.Harness) {
			warns = append(warns, fmt.Sprintf("%s.harness %q: use one of %s", where, c.Harness, strings.Join(CriticHarnesses(), ", ")))
			continue
		}
		if strings.HasPrefix(c.Model, "-") || strings.ContainsAny(c.Model, " \t\n\x00") {
			warns = append(warns, fmt.Sprintf("%s.model %q is not a model name", where, c.Model))
			continue
		}
		if s := v.Int("timeoutSeconds", 0); s > 0 && s <= 3600 {
			c.Timeout = time.Duration(s) * time.Second
		}
		out = append(out, c)
	}
	return out, warns
}

func validCriticName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// CriticSection is the execution-log section node's exit chain requires
// (validate-artifacts with validates: execution-log.md), else "Critic
// reviews".
func CriticSection(g *graph.Graph, node string) string {
	if n, ok := g.Node(node); ok {
		for _, h := range n.Exit {
			if h.Name != "validate-artifacts" || h.Params.String("validates") != "execution-log.md" {
				continue
			}
			if s := graph.AsStrings(h.Params["sections"]); len(s) > 0 {
				return s[0]
			}
		}
	}
	return "Critic reviews"
}

// CriticArtifacts lists the markdown artifacts of the work item whose spec
// directory is specDir (slash-separated, relative to root), sorted: what
// CriticPrompt names.
func CriticArtifacts(root, specDir string) []string {
	var arts []string
	if entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(specDir))); err == nil {
		for _, e := range entries {
			if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".md") {
				arts = append(arts, e.Name())
			}
		}
	}
	sort.Strings(arts)
	return arts
}

// CriticPrompt is what a critic is asked: the node and what it is for,
// the work item's artifacts by path (the critic reads them itself, from
// the repository root it runs in), and, when given, the agent's own ask.
// It asks for findings, not edits.
func CriticPrompt(node *graph.Node, id, specDir string, artifacts []string, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are a critic: an independent reviewer from a different model or tool than the one that did the work. Review work item %s at the node %q", id, node.ID)
	if node.Description != "" {
		fmt.Fprintf(&b, " (%s)", node.Description)
	}
	b.WriteString(".\n\nRead these files (paths from the repository root, your working directory):\n")
	for _, a := range artifacts {
		fmt.Fprintf(&b, "- %s/%s\n", specDir, a)
	}
	if node.ID == "critic-review" || strings.Contains(node.Stage, "critic") && !strings.Contains(node.ID, "design") {
		b.WriteString("- the changes on the current branch: `git diff $(git merge-base HEAD origin/HEAD)...HEAD` (or against main)\n")
	}
	b.WriteString("\nDo not change any file. Answer in Markdown: a one-line verdict (sound / sound with findings / not sound), then numbered findings, each with where it is (file and section or line), what is wrong, why it matters and what to do. Say plainly when you found nothing and why that is credible.\n")
	if strings.TrimSpace(extra) != "" {
		b.WriteString("\nThe author adds:\n\n")
		b.WriteString(extra)
		b.WriteString("\n")
	}
	return b.String()
}

// RecordCriticReview appends a critic's review to the work item's
// execution-log.md inside section (created at the end when absent), as a
// dated subsection naming the critic, its harness and model. The review is
// quoted in a fence its own text cannot close. It returns the log's path.
func RecordCriticReview(arts graph.Artifacts, section string, c Critic, at time.Time, review string) (string, error) {
	const log = "execution-log.md"
	old, err := fs.ReadFile(arts, log)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	text := strings.TrimRight(string(old), "\n")
	if text == "" {
		text = "# Execution log"
	}
	model := c.Model
	if model == "" {
		model = "default model"
	}
	review = strings.TrimSpace(strings.ToValidUTF8(review, "\uFFFD"))
	if review == "" {
		review = "(the critic answered nothing)"
	}
	fence := strings.Repeat("`", max(3, longestBacktickRun(review)+1))
	block := fmt.Sprintf("### %s — critic %s (%s, %s)\n\n%smarkdown\n%s\n%s", at.UTC().Format("2006-01-02 15:04 UTC"), c.Name, c.Harness, model, fence, review, fence)
	out := insertInSection(text, section, block)
	if err := arts.WriteFile(log, []byte(out+"\n")); err != nil {
		return "", err
	}
	return arts.Path(log), nil
}

// insertInSection puts block at the end of the level-2 section titled
// title (before the next heading of level 1 or 2 outside code fences), or
// appends the section when there is none.
func insertInSection(text, title, block string) string {
	lines := strings.Split(text, "\n")
	inFence, start := false, -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimLeft(l, " "), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if start < 0 {
			if strings.TrimSpace(strings.TrimPrefix(l, "## ")) == title && strings.HasPrefix(l, "## ") {
				start = i
			}
			continue
		}
		if strings.HasPrefix(l, "# ") || strings.HasPrefix(l, "## ") {
			before := strings.TrimRight(strings.Join(lines[:i], "\n"), "\n")
			return before + "\n\n" + block + "\n\n" + strings.Join(lines[i:], "\n")
		}
	}
	if start >= 0 {
		return text + "\n\n" + block
	}
	return text + "\n\n## " + title + "\n\n" + block
}

func longestBacktickRun(s string) int {
	best, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}
