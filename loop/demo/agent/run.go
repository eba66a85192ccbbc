package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/run"
)

// Options configure Run.
type Options struct {
	// Dir is the checkout (the session's working directory).
	Dir string
	// WorkItem is the spec id; default $THE_LOOP_WORK_ITEM, which theloop
	// sets in every session it spawns.
	WorkItem string
	// ConfigPath is the CLI config the claims read (required).
	ConfigPath string
	// LookupEnv reads the environment (default os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// In is the terminal (default os.Stdin); Out the screen (default
	// os.Stdout).
	In  *os.File
	Out io.Writer
	// Claimer overrides the runtime (tests); default Live.
	Claimer Claimer
	// AttackBrief, when set, is the file of an AttackBrief: at its gate the
	// agent tries to approve its own work (attack.go) and writes its
	// report beside the brief.
	AttackBrief string
	// DemoPID is the process that runs the demo: when it is gone, the agent
	// ends its own tmux server (0: no watch).
	DemoPID int
}

// Run is the scripted agent's main: what runs in the tmux session in place
// of `claude` during `loopd demo`. It shows a prompt, turns on bracketed
// paste, and on every message theloop pastes and submits, wakes the Agent,
// which works from the graph's current node and claims each node with the
// runtime `loopctl graph complete` uses. It narrates everything, so that
// whoever attaches to the session sees the agent work. It returns when its
// input ends or ctx is done.
func Run(ctx context.Context, opts Options) error {
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.In == nil {
		opts.In = os.Stdin
	}
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	if opts.Dir == "" {
		d, err := os.Getwd()
		if err != nil {
			return err
		}
		opts.Dir = d
	}
	if opts.WorkItem == "" {
		opts.WorkItem, _ = opts.LookupEnv("THE_LOOP_WORK_ITEM")
	}
	if err := loop.ValidateWorkItemID(opts.WorkItem); err != nil {
		return fmt.Errorf("the scripted agent works one work item, named by THE_LOOP_WORK_ITEM (theloop sets it when it spawns a session): %w", err)
	}
	out := &SyncWriter{W: opts.Out}
	live := &Live{Dir: opts.Dir, ConfigPath: opts.ConfigPath, LookupEnv: opts.LookupEnv, Warn: out}
	claimer := opts.Claimer
	if claimer == nil {
		claimer = live
	}
	specDir, err := live.SpecDir()
	if err != nil {
		return err
	}
	if restore, err := characterMode(int(opts.In.Fd())); err == nil {
		defer restore()
	}
	fmt.Fprint(out, bracketedPasteOn)
	defer fmt.Fprint(out, bracketedPasteOff)
	fmt.Fprintf(out, "scripted agent — stands in for Claude Code in this tmux session (theloop demo)\n")
	fmt.Fprintf(out, "  work item %s in %s\n", opts.WorkItem, opts.Dir)
	fmt.Fprintf(out, "  it acts on the graph's current node, never on the text pasted into it\n\n")
	fmt.Fprintf(out, "› waiting for theloop to paste an assignment…\n")

	agent := &Agent{Dir: opts.Dir, SpecDir: specDir, WorkItem: opts.WorkItem, Claimer: claimer, Out: out}
	if opts.AttackBrief != "" {
		brief, err := ReadAttackBrief(opts.AttackBrief)
		if err != nil {
			return err
		}
		agent.attack = &attacker{brief: brief, dir: filepath.Dir(opts.AttackBrief), checkout: opts.Dir,
			lookupEnv: opts.LookupEnv, say: agent.say, procRoot: "/proc"}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs := make(chan string, 64)
	serveErr := make(chan error, 1)
	go func() { serveErr <- Serve(ctx, opts.In, out, msgs) }()
	go watchDemo(ctx, opts.DemoPID, opts.LookupEnv, time.Second, run.Exec{})
	for msg := range msgs {
		lines := strings.Count(msg, "\n") + 1
		fmt.Fprintf(out, "\n◀ message submitted (%d line%s) — checking where %s stands\n", lines, plural(lines), opts.WorkItem)
		if err := agent.Wake(ctx); err != nil {
			fmt.Fprintf(out, "✗ %v\n", err)
		}
		fmt.Fprintf(out, "\n› waiting for the next message…\n")
	}
	err = <-serveErr
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
