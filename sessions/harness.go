package sessions

import (
	"fmt"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/harness"
	"github.com/theloop-dev/theloop/run"
)

// Harness adapts one agent CLI. Adapters build argv only; running it is the
// Tmux runner's (interactive) or the caller's run.Runner's (one-shot) job.
//
// Interactive and resume argv never carry a prompt: the first message is
// pasted once the harness is up, so text from outside never reaches a
// command line.
type Harness interface {
	// Name is the adapter's config name (its harness.Descriptor's).
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

// Adapter is the Harness of one harness.Descriptor: every harness runs
// through it, the descriptor supplying what differs (the argv, the pause
// before Enter, the preparation kind).
type Adapter struct {
	// Desc is the harness.
	Desc *harness.Descriptor
	// Bin is the program name or path (default Desc.Binary).
	Bin string
	// Args are the operator's extra arguments (routing.harnessArgs.<name>),
	// inserted after the session flags. theloop never adds permission flags
	// of its own.
	Args []string
	// ConfigEnv configures a harness.PrepareConfigDir preparation; a zero
	// ConfigEnv.ConfigDir disables it.
	ConfigEnv ClaudeEnvironment
	// TrustedFolders is the trusted-folders file a
	// harness.PrepareTrustedFolders preparation writes (for the Gemini CLI,
	// GeminiTrustedFoldersFile); "" disables it (tests must never point it
	// at a real home).
	TrustedFolders string
}

// NewAdapter is the adapter of the harness called name with the
// operator's extra arguments, or nil when no such harness is registered.
func NewAdapter(name string, args []string) *Adapter {
	d := harness.ByName(name)
	if d == nil {
		return nil
	}
	return &Adapter{Desc: d, Args: args}
}

// Name implements Harness.
func (a *Adapter) Name() string { return a.Desc.Name }

// Binary implements Harness.
func (a *Adapter) Binary() string {
	if a.Bin == "" {
		return a.Desc.Binary
	}
	return a.Bin
}

// SubmitGap implements Submitter.
func (a *Adapter) SubmitGap() time.Duration { return a.Desc.SubmitGap }

// Interactive implements Harness: the descriptor's spawn flags, then the
// operator's arguments. The session id is checked first so it can be
// recorded before the process starts.
func (a *Adapter) Interactive(sessionID string) ([]string, error) {
	if !ValidSessionID(sessionID) {
		return nil, fmt.Errorf("%w: session id %q", ErrInvalidName, sessionID)
	}
	if err := checkExtraArgs(a.Name(), a.Args); err != nil {
		return nil, err
	}
	return append(a.Desc.Spawn(sessionID), a.Args...), nil
}

// Resume implements Harness: the descriptor's resume flags, then the
// operator's arguments; ErrResumeUnsupported when the harness cannot
// resume. The id is shape-checked here because it comes from a file on
// disk.
func (a *Adapter) Resume(sessionID string) ([]string, error) {
	if a.Desc.Resume == nil {
		return nil, fmt.Errorf("%w: %s", ErrResumeUnsupported, a.Desc.ResumeRefusal)
	}
	if !ValidSessionID(sessionID) {
		return nil, fmt.Errorf("%w: cannot resume session id %q: it must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}", ErrInvalidName, sessionID)
	}
	if err := checkExtraArgs(a.Name(), a.Args); err != nil {
		return nil, err
	}
	return append(a.Desc.Resume(sessionID), a.Args...), nil
}

// OneShot implements Harness. A prompt the harness takes on standard input
// goes there, where no other process can read it and no argv length limit
// applies; one it takes as an argument must be text theloop composed,
// never text copied from a comment, and may not start with "-" (it would
// read as a flag).
func (a *Adapter) OneShot(prompt, model string) (run.Cmd, error) {
	if strings.TrimSpace(prompt) == "" {
		return run.Cmd{}, fmt.Errorf("%w: empty one-shot prompt", ErrEmptyDelivery)
	}
	if strings.HasPrefix(model, "-") {
		return run.Cmd{}, fmt.Errorf("%w: model %q starts with \"-\"", ErrUnsafeArgument, model)
	}
	args, onStdin := a.Desc.OneShot(prompt, model, a.Args)
	if onStdin {
		return run.Cmd{Name: a.Binary(), Args: args, Stdin: []byte(prompt)}, nil
	}
	if strings.HasPrefix(prompt, "-") {
		return run.Cmd{}, fmt.Errorf("%w: a %s prompt starting with \"-\" would read as a flag", ErrUnsafeArgument, a.Binary())
	}
	return run.Cmd{Name: a.Binary(), Args: args}, nil
}

// PrepareEnvironment implements Harness with the descriptor's kind of
// preparation: ClaudeEnvironment.Prepare for harness.PrepareConfigDir,
// trustGeminiFolder for harness.PrepareTrustedFolders, nothing otherwise.
func (a *Adapter) PrepareEnvironment(cwd string) (Prepared, error) {
	switch a.Desc.Prepare {
	case harness.PrepareConfigDir:
		if a.ConfigEnv.ConfigDir == "" {
			return Prepared{}, nil
		}
		return a.ConfigEnv.Prepare(cwd, a.Args)
	case harness.PrepareTrustedFolders:
		if a.TrustedFolders == "" || cwd == "" {
			return Prepared{}, nil
		}
		return trustGeminiFolder(a.TrustedFolders, cwd)
	}
	return Prepared{}, nil
}

var (
	_ Harness   = (*Adapter)(nil)
	_ Submitter = (*Adapter)(nil)
)
