package sessions

import (
	"time"

	"github.com/theloop-dev/theloop/harness"
	"github.com/theloop-dev/theloop/run"
)

// The four shipped harnesses by type, for callers that configure one field
// by field. Each is an Adapter of its descriptor (package harness); a new
// harness needs no type here — NewAdapter or an Adapter literal serves it.

// ClaudeCode is the Claude Code adapter (harness.Claude).
type ClaudeCode struct {
	// Bin is the program name or path (default harness.Claude.Binary).
	Bin string
	// Args are the operator's extra arguments (routing.harnessArgs.claude),
	// inserted after the session flags. theloop never adds permission flags
	// of its own.
	Args []string
	// Env configures PrepareEnvironment. A zero Env.ConfigDir disables it.
	Env ClaudeEnvironment
}

func (c *ClaudeCode) adapter() *Adapter {
	return &Adapter{Desc: harness.Claude, Bin: c.Bin, Args: c.Args, ConfigEnv: c.Env}
}

// Cursor is the cursor-agent adapter (harness.Cursor): Resume always fails
// with ErrResumeUnsupported, and the Manager falls back to a fresh
// conversation.
type Cursor struct {
	// Bin is the program name or path (default harness.Cursor.Binary).
	Bin string
	// Args are the operator's extra arguments (routing.harnessArgs.cursor).
	Args []string
}

func (c *Cursor) adapter() *Adapter { return &Adapter{Desc: harness.Cursor, Bin: c.Bin, Args: c.Args} }

// Codex is the Codex CLI adapter (harness.Codex). The gate is the Stop hook
// `loopctl install --harness codex` wrote.
type Codex struct {
	// Bin is the program name or path (default harness.Codex.Binary).
	Bin string
	// Args are the operator's extra arguments (routing.harnessArgs.codex).
	Args []string
}

func (c *Codex) adapter() *Adapter { return &Adapter{Desc: harness.Codex, Bin: c.Bin, Args: c.Args} }

// Gemini is the Gemini CLI adapter (harness.Gemini). The gate is the
// AfterAgent hook `loopctl install --harness gemini` wrote, at user scope
// or in the repository; the latter loads only in a folder Gemini trusted
// before it started, which PrepareEnvironment records (gemini_env.go).
type Gemini struct {
	// Bin is the program name or path (default harness.Gemini.Binary).
	Bin string
	// Args are the operator's extra arguments (routing.harnessArgs.gemini).
	Args []string
	// TrustedFolders is the Gemini CLI's trusted-folders file the session
	// reads (GeminiTrustedFoldersFile); "" disables PrepareEnvironment
	// (tests must never point it at a real home).
	TrustedFolders string
}

func (g *Gemini) adapter() *Adapter {
	return &Adapter{Desc: harness.Gemini, Bin: g.Bin, Args: g.Args, TrustedFolders: g.TrustedFolders}
}

// Name implements Harness.
func (c *ClaudeCode) Name() string { return c.adapter().Name() }

// Binary implements Harness.
func (c *ClaudeCode) Binary() string { return c.adapter().Binary() }

// Interactive implements Harness: --session-id <uuid> <args…>.
func (c *ClaudeCode) Interactive(id string) ([]string, error) { return c.adapter().Interactive(id) }

// Resume implements Harness: --resume <id> <args…>.
func (c *ClaudeCode) Resume(id string) ([]string, error) { return c.adapter().Resume(id) }

// OneShot implements Harness: `claude -p --output-format json <args…>
// [--model M]` with the prompt on standard input.
func (c *ClaudeCode) OneShot(p, m string) (run.Cmd, error) { return c.adapter().OneShot(p, m) }

// PrepareEnvironment implements Harness; see ClaudeEnvironment.Prepare.
func (c *ClaudeCode) PrepareEnvironment(cwd string) (Prepared, error) {
	return c.adapter().PrepareEnvironment(cwd)
}

// Name implements Harness.
func (c *Cursor) Name() string { return c.adapter().Name() }

// Binary implements Harness.
func (c *Cursor) Binary() string { return c.adapter().Binary() }

// Interactive implements Harness: cursor-agent <args…>.
func (c *Cursor) Interactive(id string) ([]string, error) { return c.adapter().Interactive(id) }

// Resume implements Harness; it always fails with ErrResumeUnsupported.
func (c *Cursor) Resume(id string) ([]string, error) { return c.adapter().Resume(id) }

// OneShot implements Harness: `cursor-agent -p <prompt> --output-format
// json <args…> [-m M]`.
func (c *Cursor) OneShot(p, m string) (run.Cmd, error) { return c.adapter().OneShot(p, m) }

// PrepareEnvironment implements Harness; Cursor needs nothing prepared.
func (c *Cursor) PrepareEnvironment(cwd string) (Prepared, error) {
	return c.adapter().PrepareEnvironment(cwd)
}

// Name implements Harness.
func (c *Codex) Name() string { return c.adapter().Name() }

// Binary implements Harness.
func (c *Codex) Binary() string { return c.adapter().Binary() }

// Interactive implements Harness: codex --enable hooks
// --dangerously-bypass-hook-trust <args…>.
func (c *Codex) Interactive(id string) ([]string, error) { return c.adapter().Interactive(id) }

// Resume implements Harness: codex resume --last <hook args> <args…>.
func (c *Codex) Resume(id string) ([]string, error) { return c.adapter().Resume(id) }

// OneShot implements Harness: `codex exec --json <args…> [-m M] -` with the
// prompt on standard input.
func (c *Codex) OneShot(p, m string) (run.Cmd, error) { return c.adapter().OneShot(p, m) }

// PrepareEnvironment implements Harness; the hook and the plugin are the
// operator's `loopctl install --harness codex`.
func (c *Codex) PrepareEnvironment(cwd string) (Prepared, error) {
	return c.adapter().PrepareEnvironment(cwd)
}

// Name implements Harness.
func (g *Gemini) Name() string { return g.adapter().Name() }

// SubmitGap implements Submitter (see harness.Gemini).
func (g *Gemini) SubmitGap() time.Duration { return g.adapter().SubmitGap() }

// Binary implements Harness.
func (g *Gemini) Binary() string { return g.adapter().Binary() }

// Interactive implements Harness: gemini --session-id <uuid> --skip-trust
// <args…>.
func (g *Gemini) Interactive(id string) ([]string, error) { return g.adapter().Interactive(id) }

// Resume implements Harness: gemini --resume <uuid> --skip-trust <args…>.
func (g *Gemini) Resume(id string) ([]string, error) { return g.adapter().Resume(id) }

// OneShot implements Harness: `gemini -o json <args…> [-m M]` with the
// prompt on standard input.
func (g *Gemini) OneShot(p, m string) (run.Cmd, error) { return g.adapter().OneShot(p, m) }

// PrepareEnvironment implements Harness: it marks cwd trusted in
// TrustedFolders, so that the checkout's .gemini/settings.json loads.
func (g *Gemini) PrepareEnvironment(cwd string) (Prepared, error) {
	return g.adapter().PrepareEnvironment(cwd)
}

var (
	_ Harness = (*ClaudeCode)(nil)
	_ Harness = (*Cursor)(nil)
	_ Harness = (*Codex)(nil)
	_ Harness = (*Gemini)(nil)
)
