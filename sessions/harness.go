package sessions

import (
	"fmt"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/run"
)

// Harness adapts one agent CLI. Adapters build argv only; running it is the
// Tmux runner's (interactive) or the caller's run.Runner's (one-shot) job.
//
// Interactive and resume argv never carry a prompt: the first message is
// pasted once the harness is up, so text from outside never reaches a
// command line.
type Harness interface {
	// Name is the adapter's config name ("claude", "cursor", "codex",
	// "gemini").
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

// Submitter is a Harness whose input box needs a pause between a paste
// showing on its screen and the Enter that submits it: an Enter that comes
// sooner is taken as part of the paste and dropped.
type Submitter interface {
	// SubmitGap is the pause after the pasted text is seen.
	SubmitGap() time.Duration
}

// submitGap is h's pause before Enter (0 for most harnesses).
func submitGap(h Harness) time.Duration {
	if s, ok := h.(Submitter); ok {
		return s.SubmitGap()
	}
	return 0
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

// Cursor is the Cursor adapter (binary "cursor-agent"). cursor-agent's
// interactive mode is hosted like Claude Code's, but it cannot be told the
// conversation id to use, so a respawn starts a fresh conversation pointed
// at the work item's artifacts (Resume refuses, and the Manager falls
// back).
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

// Interactive implements Harness: cursor-agent <args…> (the session id is
// theloop's own; cursor-agent keeps its chat id to itself).
func (c *Cursor) Interactive(sessionID string) ([]string, error) {
	if !ValidSessionID(sessionID) {
		return nil, fmt.Errorf("%w: session id %q", ErrInvalidName, sessionID)
	}
	if err := checkExtraArgs(c.Name(), c.Args); err != nil {
		return nil, err
	}
	return append([]string{}, c.Args...), nil
}

// Resume implements Harness; it always fails with ErrResumeUnsupported.
func (c *Cursor) Resume(string) ([]string, error) {
	return nil, fmt.Errorf("%w: cursor-agent cannot be given the chat id to resume", ErrResumeUnsupported)
}

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

// Codex is the OpenAI Codex CLI adapter (binary "codex"). Codex picks its
// own thread id, so theloop's session id names the registry record only;
// a respawn resumes with `codex resume --last`, which picks the most
// recent conversation recorded for the working directory — the work
// item's own checkout. The gate is the Stop hook `loopctl install
// --harness codex` wrote; the session runs it without Codex's per-hook
// trust prompt (--dangerously-bypass-hook-trust), since nobody is at the
// pane to answer it and a hook that does not run is a gate that does not
// hold. Hooks of an untrusted project layer are still not loaded.
type Codex struct {
	// Bin is the program name or path (default "codex").
	Bin string
	// Args are the operator's extra arguments (routing.harnessArgs.codex).
	Args []string
}

// codexHookArgs turn the hooks feature on for the session and run the
// installed hooks without the trust prompt.
var codexHookArgs = []string{"--enable", "hooks", "--dangerously-bypass-hook-trust"}

// Name implements Harness.
func (c *Codex) Name() string { return "codex" }

// Binary implements Harness.
func (c *Codex) Binary() string {
	if c.Bin == "" {
		return "codex"
	}
	return c.Bin
}

// Interactive implements Harness: codex --enable hooks
// --dangerously-bypass-hook-trust <args…>.
func (c *Codex) Interactive(sessionID string) ([]string, error) {
	if !ValidSessionID(sessionID) {
		return nil, fmt.Errorf("%w: session id %q", ErrInvalidName, sessionID)
	}
	if err := checkExtraArgs(c.Name(), c.Args); err != nil {
		return nil, err
	}
	return append(append([]string{}, codexHookArgs...), c.Args...), nil
}

// Resume implements Harness: codex resume --last <hook args> <args…>, the
// checkout's most recent conversation.
func (c *Codex) Resume(sessionID string) ([]string, error) {
	if !ValidSessionID(sessionID) {
		return nil, fmt.Errorf("%w: cannot resume session id %q", ErrInvalidName, sessionID)
	}
	if err := checkExtraArgs(c.Name(), c.Args); err != nil {
		return nil, err
	}
	return append(append([]string{"resume", "--last"}, codexHookArgs...), c.Args...), nil
}

// OneShot implements Harness: `codex exec --json <args…> [-m M] -` with
// the prompt on standard input.
func (c *Codex) OneShot(prompt, model string) (run.Cmd, error) {
	if strings.TrimSpace(prompt) == "" {
		return run.Cmd{}, fmt.Errorf("%w: empty one-shot prompt", ErrEmptyDelivery)
	}
	args := append([]string{"exec", "--json"}, c.Args...)
	if model != "" {
		if strings.HasPrefix(model, "-") {
			return run.Cmd{}, fmt.Errorf("%w: model %q starts with \"-\"", ErrUnsafeArgument, model)
		}
		args = append(args, "-m", model)
	}
	return run.Cmd{Name: c.Binary(), Args: append(args, "-"), Stdin: []byte(prompt)}, nil
}

// PrepareEnvironment implements Harness; the hook and the plugin are the
// operator's `loopctl install --harness codex`.
func (c *Codex) PrepareEnvironment(string) (Prepared, error) { return Prepared{}, nil }

// Gemini is the Gemini CLI adapter (binary "gemini"). Like Claude Code it
// takes the conversation id up front (--session-id) and resumes it by id
// (--resume, within the working directory's project). --skip-trust trusts
// the checkout for the session: an untrusted folder stops at a dialog
// nobody in the pane answers. The gate is the AfterAgent hook `loopctl
// install --harness gemini` wrote, at user scope or in the repository; the
// latter loads only in a folder Gemini trusted before it started, which
// PrepareEnvironment records (gemini_env.go).
type Gemini struct {
	// Bin is the program name or path (default "gemini").
	Bin string
	// Args are the operator's extra arguments (routing.harnessArgs.gemini).
	Args []string
	// TrustedFolders is the Gemini CLI's trusted-folders file the session
	// reads (GeminiTrustedFoldersFile); "" disables PrepareEnvironment
	// (tests must never point it at a real home).
	TrustedFolders string
}

// Name implements Harness.
func (g *Gemini) Name() string { return "gemini" }

// SubmitGap implements Submitter. The Gemini CLI (0.61) drops an Enter
// that reaches its input within 40 ms of a paste it cannot trust (any
// terminal without the kitty keyboard protocol, tmux included) as part of
// the paste, so loopd's assignment would sit in the box unsent. The pause
// runs from the moment the text is seen on the screen — the CLI has
// handled the paste by then — so a busy machine cannot shrink it.
func (g *Gemini) SubmitGap() time.Duration { return 150 * time.Millisecond }

// Binary implements Harness.
func (g *Gemini) Binary() string {
	if g.Bin == "" {
		return "gemini"
	}
	return g.Bin
}

// Interactive implements Harness: gemini --session-id <uuid> --skip-trust
// <args…>.
func (g *Gemini) Interactive(sessionID string) ([]string, error) {
	if !ValidSessionID(sessionID) {
		return nil, fmt.Errorf("%w: session id %q", ErrInvalidName, sessionID)
	}
	if err := checkExtraArgs(g.Name(), g.Args); err != nil {
		return nil, err
	}
	return append([]string{"--session-id", sessionID, "--skip-trust"}, g.Args...), nil
}

// Resume implements Harness: gemini --resume <uuid> --skip-trust <args…>.
func (g *Gemini) Resume(sessionID string) ([]string, error) {
	if !ValidSessionID(sessionID) {
		return nil, fmt.Errorf("%w: cannot resume session id %q", ErrInvalidName, sessionID)
	}
	if err := checkExtraArgs(g.Name(), g.Args); err != nil {
		return nil, err
	}
	return append([]string{"--resume", sessionID, "--skip-trust"}, g.Args...), nil
}

// OneShot implements Harness: `gemini -o json <args…> [-m M]` with the
// prompt on standard input (headless when stdin is not a terminal).
func (g *Gemini) OneShot(prompt, model string) (run.Cmd, error) {
	if strings.TrimSpace(prompt) == "" {
		return run.Cmd{}, fmt.Errorf("%w: empty one-shot prompt", ErrEmptyDelivery)
	}
	args := append([]string{"-o", "json"}, g.Args...)
	if model != "" {
		if strings.HasPrefix(model, "-") {
			return run.Cmd{}, fmt.Errorf("%w: model %q starts with \"-\"", ErrUnsafeArgument, model)
		}
		args = append(args, "-m", model)
	}
	return run.Cmd{Name: g.Binary(), Args: args, Stdin: []byte(prompt)}, nil
}

// PrepareEnvironment implements Harness: it marks cwd trusted in
// TrustedFolders, so that the checkout's .gemini/settings.json (a
// project-scope gate) loads. The hook and the extension themselves are the
// operator's `loopctl install --harness gemini`.
func (g *Gemini) PrepareEnvironment(cwd string) (Prepared, error) {
	if g.TrustedFolders == "" || cwd == "" {
		return Prepared{}, nil
	}
	return trustGeminiFolder(g.TrustedFolders, cwd)
}

var (
	_ Harness = (*ClaudeCode)(nil)
	_ Harness = (*Cursor)(nil)
	_ Harness = (*Codex)(nil)
	_ Harness = (*Gemini)(nil)
)
