// Package stopgate is loop-gate's logic: the harness Stop hook that keeps an
// agent working while the current node of its work item blocks.
//
// One stop is one pure check: the gate reads the harness's Stop payload,
// finds the work item ($THE_LOOP_WORK_ITEM, else the session registry by the
// payload's session id) and the repository (the payload's directory, walked
// up to the one holding .git or the harness config, as loopctl does), runs
// `check --recompute` in-process (an unknown work item is said on stderr), and
// answers. Only a block at the current node blocks; a human gate (wait) and a
// satisfied node let the agent stop. It blocks at most MaxAttempts times in a
// row per work item and node, then gives up.
//
// The gate fails open, deliberately: an unreadable repository, a broken
// state file, a panic — every internal error lets the agent stop and says
// why on stderr. A Stop hook that wedged a session would be worse than one
// that misses a block; CI (`loopctl check --recompute --fail-on block`) is
// the closed gate.
//
// Boundaries: no network, no subprocess, no writes to the repository's
// tracked files. The only files written are the attempt counters, outside
// the repository, and one line per decision in the event log the operator's
// CLI config names — the same file, envelope and path resolution as
// loopctl's (NFR5: observability identical at dev-time and runtime).
// Feedback reaching the agent is built from theloop's own text, node ids,
// hook messages and artifact paths — never from comment bodies.
package stopgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/harness"
	"github.com/theloop-dev/theloop/loop"
)

// WorkItemEnv names the work item a session works on; the daemon sets it in
// every session it spawns.
const WorkItemEnv = "THE_LOOP_WORK_ITEM"

// DefaultTimeout bounds one check. A check that runs out of time lets the
// agent stop.
const DefaultTimeout = 25 * time.Second

// Options are the gate's inputs. Zero optional fields mean the real world.
type Options struct {
	Harness Harness
	// Stdin holds the Stop payload (nil: none).
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment (default os.Getenv).
	Getenv func(string) string
	// Getwd is the fallback directory when the payload names none (default
	// os.Getwd).
	Getwd func() (string, error)
	// Counters keeps the attempt counts (zero: DefaultCounterDir()).
	Counters Counters
	// Lookup resolves a harness session id to a work item when
	// $THE_LOOP_WORK_ITEM is unset (nil: RegistryLookup over the real
	// environment).
	Lookup SessionLookup
	// Check evaluates a work item (nil: RecomputeCheck).
	Check func(ctx context.Context, repoRoot, workItem string) (*graph.Report, error)
	// Timeout bounds the check (0: DefaultTimeout).
	Timeout time.Duration
	// Events receives one event per decision taken for a work item in a
	// repository: gate.blocked or gate.allowed (nil: the event log of the
	// operator's CLI config, opened for the decision; see EventLogSink).
	Events graph.Sink
	// StdinTimeout bounds waiting for the Stop payload (0:
	// DefaultStdinTimeout). A harness that never closes stdin must not hold
	// the agent.
	StdinTimeout time.Duration
}

// DefaultStdinTimeout bounds reading the Stop payload, which a harness
// writes at once.
const DefaultStdinTimeout = 5 * time.Second

// ReadPayload reads at most limit bytes of r, giving up after timeout. On
// timeout the reading goroutine stays blocked on r until the process ends:
// a read of a pipe cannot be cancelled, and loop-gate lives for one stop.
func ReadPayload(r io.Reader, limit int64, timeout time.Duration) ([]byte, error) {
	type result struct {
		data []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(r, limit))
		ch <- result{b, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case res := <-ch:
		return res.data, res.err
	case <-t.C:
		return nil, fmt.Errorf("the Stop payload did not arrive within %s (stdin stayed open)", timeout)
	}
}

func (o Options) withDefaults() Options {
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Getwd == nil {
		o.Getwd = os.Getwd
	}
	if o.Counters.Dir == "" {
		o.Counters.Dir = DefaultCounterDir()
	}
	if o.Lookup == nil {
		o.Lookup = RegistryLookup(o.Getenv, os.UserHomeDir)
	}
	if o.Check == nil {
		o.Check = RecomputeCheckWith(o.Getenv)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.StdinTimeout <= 0 {
		o.StdinTimeout = DefaultStdinTimeout
	}
	if o.Harness == "" {
		o.Harness = Harness(harness.Default().Name)
	}
	return o
}

// RecomputeCheck is `loopctl check <id> --recompute` in-process: it opens
// the repository's loop for the work item and evaluates every node, purely,
// verifying recorded decisions against the trust anchor of the process
// environment ($THE_LOOP_TRUST_KEYS, $THE_LOOP_TRUST_BASE).
func RecomputeCheck(ctx context.Context, repoRoot, workItem string) (*graph.Report, error) {
	return RecomputeCheckWith(os.Getenv)(ctx, repoRoot, workItem)
}

// RecomputeCheckWith is RecomputeCheck reading the trust anchor through
// getenv. Without an anchor the report carries loop.UnverifiedWarning.
func RecomputeCheckWith(getenv func(string) string) func(ctx context.Context, repoRoot, workItem string) (*graph.Report, error) {
	return func(ctx context.Context, repoRoot, workItem string) (*graph.Report, error) {
		v, err := loop.LoadVerifier(ctx, loop.TrustSource{Env: getenv(loop.TrustKeysEnv), Base: getenv(loop.TrustBaseEnv), Repo: repoRoot})
		if err != nil {
			return nil, fmt.Errorf("the trust anchor cannot be used: %w", err)
		}
		opts := loop.Options{WorkItem: workItem}
		if v != nil {
			opts.DecisionVerifier = v
		}
		repo, err := loop.OpenRepo(repoRoot, "")
		if err != nil {
			return nil, err
		}
		// A mistyped $THE_LOOP_WORK_ITEM must not pass as an empty work item
		// that merely waits: say so (the gate still fails open).
		if err := repo.RequireWorkItem(workItem); err != nil {
			return nil, err
		}
		rt, err := repo.Runtime(opts)
		if err != nil {
			return nil, err
		}
		rep, err := rt.Status(ctx, workItem, true)
		if err == nil && v == nil {
			rep.Warnings = append(rep.Warnings, loop.UnverifiedWarning)
		}
		return rep, err
	}
}

// Verdict is the gate's answer to one stop.
type Verdict struct {
	// Block keeps the agent working; Reason is what it is told.
	Block  bool
	Reason string
	// Node is the current node the check reported ("" when none ran);
	// Attempt counts this block (0 when allowing).
	Node    string
	Attempt int
	// Notes go to stderr (for the operator, not the agent).
	Notes []string
}

// Run answers one stop: it writes the harness's block answer to Stdout when
// the gate blocks, notes to Stderr, and returns the process exit code,
// which is always 0 — each harness reads a block from the JSON (see
// Harness), and exit 0 with nothing on stdout lets the agent stop. Run
// never panics.
func Run(ctx context.Context, o Options) int {
	o = o.withDefaults()
	v := Evaluate(ctx, o)
	for _, n := range v.Notes {
		fmt.Fprintln(o.Stderr, "loop-gate:", n)
	}
	if v.Block {
		if err := writeBlock(o.Stdout, o.Harness, v.Reason); err != nil {
			fmt.Fprintln(o.Stderr, "loop-gate: could not write the answer:", err)
		}
	}
	return 0
}

// writeBlock writes the harness's "keep working" answer carrying reason,
// the text the agent sees next.
func writeBlock(w io.Writer, h Harness, reason string) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(h.descriptor().Gate.Block(reason))
}

// Evaluate decides one stop without writing the answer. Every failure is an
// allowing verdict with a note; a panic anywhere below is one too.
func Evaluate(ctx context.Context, o Options) (v Verdict) {
	o = o.withDefaults()
	defer func() {
		if p := recover(); p != nil {
			v = allow(fmt.Sprintf("internal error (%v); letting the agent stop — run `loopctl check <work-item> --recompute` to see the state", p))
		}
	}()
	var notes []string
	var p Payload
	if o.Stdin != nil {
		data, err := ReadPayload(o.Stdin, MaxPayloadBytes, o.StdinTimeout)
		if err != nil {
			notes = append(notes, fmt.Sprintf("could not read the Stop payload: %v", err))
		}
		if p, err = ParsePayload(data); err != nil {
			notes = append(notes, fmt.Sprintf("ignoring the Stop payload: %v", err))
		}
	}
	v = decide(ctx, o, p)
	v.Notes = append(notes, v.Notes...)
	return v
}

func allow(notes ...string) Verdict { return Verdict{Notes: notes} }

func decide(ctx context.Context, o Options, p Payload) (v Verdict) {
	// Cursor also fires stop when the user aborted or the agent errored:
	// there is nothing to finish, and a follow-up would fight the user.
	if p.Status == "aborted" || p.Status == "error" {
		return allow()
	}
	id, hint, note := workItem(o, p)
	if id == "" {
		if note != "" {
			return allow(note)
		}
		return allow()
	}
	if err := loop.ValidateWorkItemID(id); err != nil {
		return allow(fmt.Sprintf("%s=%q is not a work item id (%v); set it to the spec directory's name, e.g. issue-42", WorkItemEnv, id, err))
	}
	start := p.Cwd
	if start == "" {
		start = hint
	}
	if start == "" {
		wd, err := o.Getwd()
		if err != nil {
			return allow(fmt.Sprintf("%s: no directory in the Stop payload and no working directory (%v); letting the agent stop", id, err))
		}
		start = wd
	}
	root, err := FindRepoRoot(start)
	if err != nil {
		return allow(fmt.Sprintf("%s: %v; letting the agent stop", id, err))
	}
	// State first, then the event: the counters are kept by verdict; the
	// decision is logged once taken, before the harness reads it.
	defer func() { v.Notes = append(v.Notes, logDecision(o, root, id, v)...) }()

	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	rep, err := o.Check(cctx, root, id)
	if err == nil && cctx.Err() != nil {
		err = fmt.Errorf("the check did not finish within %s", o.Timeout)
	}
	if err != nil {
		return allow(fmt.Sprintf("%s: could not check %s (%v); letting the agent stop — run `loopctl check %s --recompute` in %s", id, root, err, id, root))
	}
	return verdict(o, root, id, rep)
}

// Blocking returns the current node's report when it blocks: the only case
// in which the gate keeps the agent working. A human gate (wait), a
// satisfied node and a current node the report does not list all let the
// agent stop.
func Blocking(rep *graph.Report) (graph.NodeReport, bool) {
	if rep == nil {
		return graph.NodeReport{}, false
	}
	n, ok := rep.Node(rep.CurrentNode)
	if !ok || n.Status != graph.StatusBlock {
		return graph.NodeReport{}, false
	}
	return n, true
}

func verdict(o Options, root, id string, rep *graph.Report) Verdict {
	v := verdictOf(o, root, id, rep)
	if rep != nil && v.Node == "" {
		v.Node = rep.CurrentNode
	}
	if rep != nil {
		for _, w := range rep.Warnings {
			// The unverified-decisions warning, and a graph-state.json that
			// could not be read or parsed (the check ran on the state
			// reconstructed from the artifacts): the operator hears of it,
			// whatever the verdict.
			if w == loop.UnverifiedWarning || strings.Contains(w, "graph-state.json") {
				v.Notes = append(v.Notes, w)
			}
		}
	}
	return v
}

func verdictOf(o Options, root, id string, rep *graph.Report) Verdict {
	node, blocks := Blocking(rep)
	if !blocks {
		if err := o.Counters.Reset(root, id); err != nil {
			return allow(fmt.Sprintf("could not clear the attempt counters: %v", err))
		}
		return allow()
	}
	limit := ParseMaxAttempts(o.Getenv(MaxAttemptsEnv))
	n, err := o.Counters.Increment(root, id, node.Node)
	if err != nil {
		// Without a counter nothing bounds the loop: fail open.
		return allow(fmt.Sprintf("%s is blocked at node `%s`, but the attempt counter in %s cannot be kept (%v); letting the agent stop — run `loopctl check %s --recompute`", id, node.Node, o.Counters.Dir, err, id))
	}
	if n > limit {
		var notes []string
		if err := o.Counters.Reset(root, id); err != nil {
			notes = append(notes, fmt.Sprintf("could not clear the attempt counters: %v", err))
		}
		notes = append(notes, fmt.Sprintf("%s is still blocked at node `%s` after %d attempts; giving up and letting the agent stop (%s raises the limit). Run `loopctl check %s --recompute` to see what is missing.", id, node.Node, limit, MaxAttemptsEnv, id))
		return Verdict{Notes: notes}
	}
	return Verdict{Block: true, Reason: Reason(id, node, n, limit), Node: node.Node, Attempt: n}
}

// Reason limits: the agent needs the findings, not a wall of text.
const (
	maxReasonMessages   = 20
	maxReasonMessageLen = 400
)

// Reason is the text that keeps the agent working: theloop's own words, the
// node id, and the node's hook messages (which name hooks, sections and
// artifact paths — never comment text).
func Reason(id string, node graph.NodeReport, attempt, limit int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "theloop: %s is at node `%s`, which is not done", id, node.Node)
	if len(node.Messages) == 0 {
		fmt.Fprintf(&b, " (its exit chain blocks; `loopctl check %s --recompute` says why).\n", id)
	} else {
		b.WriteString(":\n")
		for i, m := range node.Messages {
			if i == maxReasonMessages {
				fmt.Fprintf(&b, "  · … and %d more (`loopctl check %s --recompute` lists them all)\n", len(node.Messages)-i, id)
				break
			}
			fmt.Fprintf(&b, "  · %s\n", oneLine(m, maxReasonMessageLen))
		}
	}
	fmt.Fprintf(&b, "\nFix these, then run `loopctl graph complete %s`. (attempt %d/%d)", id, attempt, limit)
	return b.String()
}

// oneLine folds a message onto one line, drops control characters and caps
// its length.
func oneLine(s string, limit int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == limit {
			b.WriteString("…")
			break
		}
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			r = ' '
		case unicode.IsControl(r):
			continue
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// workItem finds the work item: $THE_LOOP_WORK_ITEM, else the session
// registry by the payload's session id. hint is the registry's directory for
// the session, when it came from there. An empty id with an empty note is
// the common case of a session that is not theloop's: let it stop quietly.
func workItem(o Options, p Payload) (id, hint, note string) {
	if id := strings.TrimSpace(o.Getenv(WorkItemEnv)); id != "" {
		return id, "", ""
	}
	if p.SessionID == "" {
		return "", "", ""
	}
	s, err := o.Lookup(p.SessionID)
	switch {
	case errors.Is(err, ErrNoSession):
		return "", "", ""
	case err != nil:
		return "", "", fmt.Sprintf("could not look up session %s in the session registry (%v); letting the agent stop", p.SessionID, err)
	}
	return s.WorkItem, s.Cwd, ""
}

// FindRepoRoot walks up from dir to the repository root as loop.FindRoot
// does (the directory holding .git — a directory in a clone, a file in a
// worktree — or theloop's harness config) and returns it with symlinks
// resolved. It runs no program.
func FindRepoRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("the session's directory %q: %v", dir, err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return "", fmt.Errorf("the session's directory %s does not exist or is not a directory", abs)
	}
	root, ok := loop.FindRoot(abs)
	if !ok {
		return "", fmt.Errorf("no git repository at or above %s", abs)
	}
	return root, nil
}

// EventSource is the envelope's source for loop-gate's events.
const EventSource = "loop-gate"

// Decision event names.
const (
	EventBlocked = "gate.blocked"
	EventAllowed = "gate.allowed"
)

// maxEventNote bounds the note carried by an allowed event.
const maxEventNote = 500

// logDecision emits the decision to o.Events, or to the CLI config's event
// log, and returns notes for stderr when the log cannot be written (the
// decision stands: a Stop hook fails open).
func logDecision(o Options, root, id string, v Verdict) []string {
	sink, closeSink, err := o.Events, func() {}, error(nil)
	if sink == nil {
		if sink, closeSink, err = EventLogSink(o.Getenv, root, o.Stderr); err != nil {
			return []string{"the event log is unavailable: " + err.Error()}
		}
	}
	defer closeSink()
	if sink == nil {
		return nil
	}
	fields := []graph.Field{{Key: "work_item", Value: id}, {Key: "harness", Value: string(o.Harness)}}
	if v.Node != "" {
		fields = append(fields, graph.Field{Key: "node", Value: v.Node})
	}
	name, level := EventAllowed, graph.LevelInfo
	if v.Block {
		name, level = EventBlocked, graph.LevelWarning
		fields = append(fields, graph.Field{Key: "attempt", Value: v.Attempt}, graph.Field{Key: "limit", Value: ParseMaxAttempts(o.Getenv(MaxAttemptsEnv))})
	} else if len(v.Notes) > 0 {
		fields = append(fields, graph.Field{Key: "note", Value: oneLine(strings.Join(v.Notes, "; "), maxEventNote)})
	}
	sink.Emit(graph.LogEvent{Name: name, Level: level, Fields: fields})
	return nil
}

// EventLogSink opens the event log the operator's CLI config names for the
// repository at root, resolved as loopctl resolves it: --config is not
// available to a Stop hook, so $THE_LOOP_CLI_CONFIG › <root>/.the-loop/
// cli-config.yaml › ~/.the-loop/cli-config.yaml, and a relative
// eventLog.path is taken in root. It returns a nil sink when the log is
// disabled. A failing write is reported to warnings. close must be called
// when done.
func EventLogSink(getenv func(string) string, root string, warnings io.Writer) (graph.Sink, func(), error) {
	nop := func() {}
	cfg, err := loop.LoadCLIConfig(loop.CLIConfigSource{
		LookupEnv: func(k string) (string, bool) { v := getenv(k); return v, v != "" },
		HomeDir: func() (string, error) {
			if h := getenv("HOME"); h != "" {
				return h, nil
			}
			return "", errors.New("$HOME is not set")
		},
		WorkDir: root,
	})
	if err != nil {
		return nil, nop, err
	}
	if !cfg.EventLogEnabled || cfg.EventLogPath == "" {
		return nil, nop, nil
	}
	path := cfg.EventLogPath
	if strings.HasPrefix(path, "~") {
		return nil, nop, fmt.Errorf("eventLog.path %s names the home directory but $HOME is not set", path)
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	el, err := loop.OpenEventLog(path, EventSource, loop.EventLogOptions{Warnings: warnings})
	if err != nil {
		return nil, nop, err
	}
	return el, func() { _ = el.Close() }, nil
}
