// Package agent is the demo's scripted agent: the program `loopd demo`
// runs in each session's pane instead of an AI coding agent. It reads the
// assignment pasted into its terminal, writes the node's artifacts into the
// checkout, claims the node with the runtime `loopctl graph complete` uses
// (Claimer, Live), answers review comments, and at one approval gate
// tries what a compromised agent would (attack.go), narrating each refusal.
// It is a harness stand-in, not part of the daemon: it runs only inside a
// session, with the session's rights.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/run"
)

// Claimer is the agent's view of the runtime: the two things an agent
// learns from and says to theloop. Live (live.go) implements it with the
// runtime `loopctl graph complete` uses.
type Claimer interface {
	// Current returns where the work item stands.
	Current(ctx context.Context, id string) (Position, error)
	// Complete claims the current node done, exactly as
	// `loopctl graph complete <id>` does.
	Complete(ctx context.Context, id string) (*graph.Claim, error)
}

// Position is where a work item stands.
type Position struct {
	// Node is the current node ("" before the work item started).
	Node string
	// Human: the node waits for a person (actor: human).
	Human bool
	// Terminal: the loop is complete.
	Terminal bool
}

// Agent does the scripted work of one work item in one checkout. Its
// decisions come from the graph (the current node), never from the text
// pasted into it: a message only wakes it up.
type Agent struct {
	// Dir is the checkout (the work item's worktree).
	Dir string
	// SpecDir is the spec directory relative to Dir ("docs/specs").
	SpecDir string
	// WorkItem is the spec id ("issue-1").
	WorkItem string
	Claimer  Claimer
	// Out receives the narration.
	Out io.Writer
	// Script is the work per node (default Script()).
	Script map[string][]Turn

	// attack, when set, is tried once at its brief's gate (attack.go).
	attack   *attacker
	attacked bool

	tries  map[string]int
	runner run.Runner
}

// MaxSteps bounds one wake-up: an agent never claims more than this many
// times in a row without a new message.
const MaxSteps = 40

// Wake is one wake-up: the agent looks at where the work item stands and
// works node after node until it reaches a human gate, runs out of ideas
// for a blocked node, or the loop is complete.
func (a *Agent) Wake(ctx context.Context) error {
	if a.Script == nil {
		a.Script = Script()
	}
	if a.tries == nil {
		a.tries = map[string]int{}
	}
	if a.runner == nil {
		a.runner = run.Exec{}
	}
	for range MaxSteps {
		pos, err := a.Claimer.Current(ctx, a.WorkItem)
		if err != nil {
			return fmt.Errorf("reading where %s stands: %w", a.WorkItem, err)
		}
		node := pos.Node
		turns, scripted := a.Script[node]
		switch {
		case node == "":
			a.say("● %s has not started yet — nothing to do until theloop starts it", a.WorkItem)
			return nil
		case pos.Human:
			if a.attack != nil && !a.attacked && node == a.attack.brief.Gate {
				a.attacked = true
				if err := a.attack.run(ctx, a.WorkItem); err != nil {
					a.say("✗ writing the attack report: %v", err)
				}
			}
			a.say("\n● %s waits at %s, a human gate: I do not claim it; waiting for a person on the ticket", a.WorkItem, node)
			return nil
		case pos.Terminal:
			a.say("● %s is complete — nothing left to do", a.WorkItem)
			return nil
		case !scripted:
			a.say("● %s is at %s, which this scripted agent has no work for; waiting", a.WorkItem, node)
			return nil
		}
		i := a.tries[node]
		if i >= len(turns) {
			a.say("● %s: I have tried everything I know at %s; waiting for help (attach and look, or force the node)", a.WorkItem, node)
			return nil
		}
		if err := a.work(ctx, node, turns[i]); err != nil {
			// The turn is not used up: its work did not land (it was not
			// committed, nor claimed), so the next message retries the same
			// turn instead of skipping to the next one.
			return fmt.Errorf("%s, turn %d (%q) did not land and is not claimed; the next message retries it: %w", node, i+1, turns[i].Say, err)
		}
		a.tries[node] = i + 1
		claim, err := a.Claimer.Complete(ctx, a.WorkItem)
		if err != nil {
			return fmt.Errorf("loopctl graph complete %s: %w", a.WorkItem, err)
		}
		// Moved: the next node's work follows (a real agent reads the next
		// assignment in the command's output). Blocked: the next turn at this
		// node answers the findings. Refused (someone else moved the item):
		// the next round looks again.
		a.report(claim)
	}
	a.say("● %d claims in one go; pausing until the next message", MaxSteps)
	return nil
}

func (a *Agent) say(format string, args ...any) {
	fmt.Fprintf(a.Out, format+"\n", args...)
}

func (a *Agent) work(ctx context.Context, node string, t Turn) error {
	a.say("\n● %s — %s", node, t.Say)
	dir := filepath.Join(a.Dir, filepath.FromSlash(a.SpecDir), a.WorkItem)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(t.Files)) {
		rel := filepath.ToSlash(filepath.Join(a.SpecDir, a.WorkItem, name))
		p := filepath.Join(dir, name)
		body := t.Files[name]
		// The approval gate writes the lock into the front matter and the
		// review under ## Review comments; keep what it wrote rather than
		// undo it.
		if old, err := os.ReadFile(p); err == nil {
			body = Revise(string(old), body)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
		a.say("  write  %s (%d lines)", rel, strings.Count(body, "\n"))
	}
	for _, s := range t.Log {
		rel := filepath.ToSlash(filepath.Join(a.SpecDir, a.WorkItem, "execution-log.md"))
		if err := appendLog(filepath.Join(dir, "execution-log.md"), a.WorkItem, s); err != nil {
			return err
		}
		a.say("  append %s: ## %s", rel, s.Heading)
	}
	msg := fmt.Sprintf("docs(%s): %s", a.WorkItem, t.Say)
	if err := a.commit(ctx, msg); err != nil {
		return err
	}
	a.say("  $ git commit -m %q", msg)
	a.say("  $ loopctl graph complete %s", a.WorkItem)
	return nil
}

// Committing a turn.
const (
	// gitAttempts is how often commit tries `git add` + `git commit`.
	gitAttempts = 3
	// stateLockTimeout bounds the wait for the work item's state lock,
	// which the daemon holds while it moves the work item.
	stateLockTimeout = time.Minute
)

// gitRetryDelay is the pause before the second attempt (doubled after).
var gitRetryDelay = 250 * time.Millisecond

// commit stages everything in the checkout and commits it, holding the
// work item's graph-state.lock meanwhile. The daemon saves graph-state.json
// into the same spec directory, atomically, through a temp file it renames
// (and only under that lock): `git add -A` running beside such a save lists
// the temp file and then fails with "unable to stat
// '…/.graph-state.json.tmp-…'". Under the lock no save runs, so the
// snapshot is the state between two transitions. A failure that remains is
// printed and retried; the last one is returned, never ignored.
func (a *Agent) commit(ctx context.Context, msg string) error {
	unlock, err := loop.NewStore(a.Dir, a.SpecDir).Lock(ctx, a.WorkItem, stateLockTimeout)
	if err != nil {
		return fmt.Errorf("committing %q: %w", msg, err)
	}
	defer unlock()
	delay := gitRetryDelay
	for attempt := 1; ; attempt++ {
		err := a.git(ctx, "add", "-A")
		if err == nil {
			err = a.git(ctx, "commit", "-q", "--allow-empty", "-m", msg)
		}
		if err == nil {
			return nil
		}
		if attempt == gitAttempts || ctx.Err() != nil {
			return fmt.Errorf("committing %q failed %d times, the last: %w", msg, attempt, err)
		}
		a.say("  ✗ %s — retrying in %s (attempt %d of %d)", oneLine(err.Error()), delay, attempt+1, gitAttempts)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		delay *= 2
	}
}

func (a *Agent) git(ctx context.Context, args ...string) error {
	full := append([]string{"-c", "user.name=scripted agent", "-c", "user.email=agent@demo.invalid", "-c", "commit.gpgsign=false"}, args...)
	if _, err := a.runner.Run(ctx, run.Cmd{Name: "git", Args: full, Dir: a.Dir}); err != nil {
		return fmt.Errorf("git %s in %s: %w", args[0], a.Dir, err)
	}
	return nil
}

func (a *Agent) report(c *graph.Claim) {
	switch {
	case c.Moved:
		a.say("    %s: %s → now at %s", c.Node, c.Outcome, c.CurrentNode)
	case c.Reason != "":
		a.say("    %s: refused (%s) — at %s", c.Node, c.Reason, c.CurrentNode)
	default:
		a.say("    %s: %s — stays at %s", c.Node, c.Status, c.CurrentNode)
	}
	for _, m := range c.Messages {
		if strings.HasPrefix(m, "advanced to ") {
			continue
		}
		a.say("      %s", oneLine(m))
	}
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 160 {
		s = string(r[:160]) + "…"
	}
	return s
}

// splitFrontMatter returns a leading "---\n…\n---\n" block and the rest.
func splitFrontMatter(s string) (fm, rest string, ok bool) {
	if !strings.HasPrefix(s, "---\n") {
		return "", s, false
	}
	end := strings.Index(s[4:], "\n---\n")
	if end < 0 {
		return "", s, false
	}
	cut := 4 + end + len("\n---\n")
	return s[:cut], s[cut:], true
}

// appendLog appends a section to execution-log.md, creating the file with
// its title when it does not exist.
func appendLog(path, id string, s LogSection) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(old) == 0 {
		old = []byte("# Execution log — " + id + "\n")
	}
	var add string
	if strings.Contains(string(old), "\n## "+s.Heading+"\n") {
		add = "\n" + s.Body + "\n"
	} else {
		add = "\n## " + s.Heading + "\n\n" + s.Body + "\n"
	}
	return os.WriteFile(path, append(old, add...), 0o644)
}
