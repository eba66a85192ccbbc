package sessions

import (
	"fmt"
	"strings"

	"github.com/theloop-dev/theloop/run"
)

// Harness adapts one agent CLI. Adapters build argv only; running it is the
// Tmux runner's (interactive) or the caller's run.Runner's (one-shot) job.
//
// Interactive and resume argv never carry a prompt: the first message is
// pasted once the harness is up, so text from outside never reaches a
// command line.
type Harness interface {
	// Name is the adapter's config name ("claude", "cursor").
	Name() string
	// Binary is the program to look up on PATH.
	Binary() string
	// Interactive returns the arguments (after the binary) that start a new
	// conversation under sessionID.
	Interactive(sessionID string) ([]string, error)
	// Resume returns the arguments that reopen the conversation sessionID.
	Resume(sessionID string) ([]string, error)
	// OneShot returns a command that answers prompt and exits (critics,
	// classifiers); model "" means the harness default.
	OneShot(prompt, model string) (run.Cmd, error)
	// PrepareEnvironment makes cwd ready for an unattended session (for
	// Claude Code: workspace trust and plugin enablement). It is best effort
	// from the spawner's point of view: an error is reported, not fatal.
	PrepareEnvironment(cwd string) (Prepared, error)
}

// Prepared says what PrepareEnvironment changed.
type Prepared struct {
	// Changed lists the files written.
	Changed []string
	// Trusted lists the directories marked trusted.
	Trusted []string
	// Warnings are problems found and left alone (an operator's setting
	// theloop does not flip).
	Warnings []string
}

// checkExtraArgs validates operator-configured harness arguments: they pass
// through tmux, so none may end in ";" or hold a NUL.
func checkExtraArgs(harness string, args []string) error {
	for _, a := range args {
		if err := tmuxArgSafe(a); err != nil {
			return fmt.Errorf("harness %s argument: %w", harness, err)
		}
	}
	return nil
}

// ClaudeCode is the Claude Code adapter (binary "claude").
type ClaudeCode struct {
	// Bin is the program name or path (default "claude").
	Bin string
	// Args are the operator's extra arguments (routing.harnessArgs.claude),
	// inserted after the session flags. theloop never adds permission flags
	// of its own.
	Args []string
	// Env configures PrepareEnvironment. A zero Env.ConfigDir disables it.
	Env ClaudeEnvironment
}

// Name implements Harness.
func (c *ClaudeCode) Name() string { return "claude" }

// Binary implements Harness.
func (c *ClaudeCode) Binary() string {
	if c.Bin == "" {
		return "claude"
	}
	return c.Bin
}

// Interactive implements Harness: --session-id <uuid> <args…>, so the
// conversation id is known before the process starts and can be recorded
// first.
func (c *ClaudeCode) Interactive(sessionID string) ([]string, error) {
	if !ValidSessionID(sessionID) {
		return nil, fmt.Errorf("%w: session id %q", ErrInvalidName, sessionID)
	}
	if err := checkExtraArgs(c.Name(), c.Args); err != nil {
		return nil, err
	}
	return append([]string{"--session-id", sessionID}, c.Args...), nil
}

// Resume implements Harness: --resume <id> <args…>. The id is shape-checked
// here because it comes from a file on disk.
func (c *ClaudeCode) Resume(sessionID string) ([]string, error) {
	if !ValidSessionID(sessionID) {
		return nil, fmt.Errorf("%w: cannot resume session id %q: it must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}", ErrInvalidName, sessionID)
	}
	if err := checkExtraArgs(c.Name(), c.Args); err != nil {
		return nil, err
	}
	return append([]string{"--resume", sessionID}, c.Args...), nil
}

// OneShot implements Harness: `claude -p --output-format json <args…>
// [--model M]` with the prompt on standard input, where no other process
// can read it and no argv length limit applies.
func (c *ClaudeCode) OneShot(prompt, model string) (run.Cmd, error) {
	if strings.TrimSpace(prompt) == "" {
		return run.Cmd{}, fmt.Errorf("%w: empty one-shot prompt", ErrEmptyDelivery)
	}
	args := append([]string{"-p", "--output-format", "json"}, c.Args...)
	if model != "" {
		if strings.HasPrefix(model, "-") {
			return run.Cmd{}, fmt.Errorf("%w: model %q starts with \"-\"", ErrUnsafeArgument, model)
		}
		args = append(args, "--model", model)
	}
	return run.Cmd{Name: c.Binary(), Args: args, Stdin: []byte(prompt)}, nil
}

// PrepareEnvironment implements Harness; see ClaudeEnvironment.Prepare.
func (c *ClaudeCode) PrepareEnvironment(cwd string) (Prepared, error) {
	if c.Env.ConfigDir == "" {
		return Prepared{}, nil
	}
	return c.Env.Prepare(cwd, c.Args)
}

// Cursor is the Cursor adapter (binary "cursor-agent"). cursor-agent has no
// resumable interactive mode theloop can host, so it only runs one-shot
// commands; a daemon-hosted session is Claude Code.
type Cursor struct {
	// Bin is the program name or path (default "cursor-agent").
	Bin string
	// Args are the operator's extra arguments (routing.harnessArgs.cursor).
	Args []string
}

// Name implements Harness.
func (c *Cursor) Name() string { return "cursor" }

// Binary implements Harness.
func (c *Cursor) Binary() string {
	if c.Bin == "" {
		return "cursor-agent"
	}
	return c.Bin
}

func (c *Cursor) refuse() error {
	return fmt.Errorf("%w: cursor-agent runs one-shot commands only; set the session harness to \"claude\" (Cursor can still serve as a critic)", ErrInteractiveUnsupported)
}

// Interactive implements Harness; it always fails with
// ErrInteractiveUnsupported.
func (c *Cursor) Interactive(string) ([]string, error) { return nil, c.refuse() }

// Resume implements Harness; it always fails with ErrInteractiveUnsupported.
func (c *Cursor) Resume(string) ([]string, error) { return nil, c.refuse() }

// OneShot implements Harness: `cursor-agent -p <prompt> --output-format json
// <args…> [-m M]`. cursor-agent takes its prompt as an argument, so callers
// must pass only text theloop composed, never text copied from a comment; a
// prompt starting with "-" is refused because it would read as a flag.
func (c *Cursor) OneShot(prompt, model string) (run.Cmd, error) {
	if strings.TrimSpace(prompt) == "" {
		return run.Cmd{}, fmt.Errorf("%w: empty one-shot prompt", ErrEmptyDelivery)
	}
	if strings.HasPrefix(prompt, "-") {
		return run.Cmd{}, fmt.Errorf("%w: a cursor-agent prompt starting with \"-\" would read as a flag", ErrUnsafeArgument)
	}
	args := append([]string{"-p", prompt, "--output-format", "json"}, c.Args...)
	if model != "" {
		if strings.HasPrefix(model, "-") {
			return run.Cmd{}, fmt.Errorf("%w: model %q starts with \"-\"", ErrUnsafeArgument, model)
		}
		args = append(args, "-m", model)
	}
	return run.Cmd{Name: c.Binary(), Args: args}, nil
}

// PrepareEnvironment implements Harness; Cursor needs nothing prepared.
func (c *Cursor) PrepareEnvironment(string) (Prepared, error) { return Prepared{}, nil }

var (
	_ Harness = (*ClaudeCode)(nil)
	_ Harness = (*Cursor)(nil)
)
