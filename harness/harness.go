// Package harness describes the agent CLIs theloop runs a session in, one
// Descriptor per harness and one file per descriptor (claude.go, cursor.go,
// codex.go, gemini.go). A descriptor holds everything that differs between
// harnesses: the name operators write, the command lines, the kind of
// environment a session needs prepared, the answer loop-gate gives the
// harness's stop hook, where `loopctl install` puts the hook, the hosts the
// sandbox lets it reach and what it cannot do. The sessions adapters,
// loop-gate, the installer, the settings and the critics read the
// registry (All, ByName) instead of keeping their own lists, so adding a
// harness is one new file here and its tests.
//
// The package imports nothing of theloop's and does no I/O: descriptors are
// data and pure functions, registered from init.
package harness

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Descriptor is one harness. The zero value of an optional field means the
// harness does not have the feature; Register checks the required ones.
type Descriptor struct {
	// Name is the harness's config name: routing.defaultHarness, a
	// "the-loop: harness-<name>" label, loop-gate's argument, a critic's
	// harness. Lower-case letters and digits.
	Name string
	// Title is how messages name it ("Claude Code").
	Title string
	// Binary is the program run when the operator names none.
	Binary string
	// Default marks the harness used when none is named (exactly one).
	Default bool
	// Order places the harness in lists (usage text, error messages,
	// settings' enums): lower first, then by name.
	Order int

	// Spawn is the arguments, before the operator's extra ones, that start
	// a new conversation under sessionID (already shape-checked).
	// Interactive argv never carries a prompt: the first message is pasted.
	Spawn func(sessionID string) []string
	// Resume is the arguments, before the operator's extra ones, that
	// reopen the conversation sessionID; nil when the harness cannot be
	// told which conversation to reopen (a respawn then starts afresh).
	Resume func(sessionID string) []string
	// ResumeRefusal says why Resume is nil.
	ResumeRefusal string
	// OneShot is a command that answers prompt and exits (critics,
	// classifiers): the arguments with the operator's extra ones in place,
	// model "" meaning the harness's default, and whether the prompt goes
	// on standard input (false: it is one of args).
	OneShot func(prompt, model string, extra []string) (args []string, promptOnStdin bool)
	// SubmitGap is the pause between a paste showing in the harness's input
	// box and the Enter that submits it (0: none needed).
	SubmitGap time.Duration

	// Prepare is what a checkout needs before the harness starts in it.
	Prepare Preparation
	// TranscriptInConfigDir: the harness keeps each conversation's
	// transcript under its config directory, where loopd can read it.
	TranscriptInConfigDir bool

	// Gate is the stop hook's protocol.
	Gate Gate
	// Install is where `loopctl install` puts the hook and the prose.
	Install Install
	// Egress are the API hosts the harness reaches by default (the
	// sandbox's allowlist).
	Egress []string
	// Degrades lists, for operators, what theloop cannot do with this
	// harness that it does with others.
	Degrades []string
}

// Preparation is a kind of environment preparation a checkout needs. The
// sessions package implements each kind once; a harness picks one.
type Preparation int

const (
	// PrepareNothing: the harness starts as it is.
	PrepareNothing Preparation = iota
	// PrepareConfigDir: workspace trust, the bypass disclaimer and plugin
	// enablement are written in the harness's config directory (the
	// operator's ClaudeEnvironment).
	PrepareConfigDir
	// PrepareTrustedFolders: the checkout is marked trusted in the
	// harness's trusted-folders file before it starts, so that its
	// project-scope hook loads.
	PrepareTrustedFolders
)

// Gate is how loop-gate answers the harness's stop hook. Every harness
// reads exit 0 with nothing on stdout as "let the agent stop", which is
// what every allowing verdict and every internal failure answers.
type Gate struct {
	// Event is the hook event the gate runs on ("Stop").
	Event string
	// Block is the JSON value written on stdout to keep the agent working,
	// reason being the text it sees next.
	Block func(reason string) any
	// CrashTextBlocks: the harness reads a non-zero exit with text on
	// stderr as a block, so a crashing gate must not print the runtime's
	// text (it would reach the agent as an instruction).
	CrashTextBlocks bool
	// ProjectDirVar is the variable the harness sets, in a hook's
	// environment, to the project directory ("": none); a project-scope
	// hook names loop-gate relative to it.
	ProjectDirVar string
	// ProjectDirInText: the harness replaces $ProjectDirVar in the command
	// text itself (no shell quoting around it).
	ProjectDirInText bool
}

// Decision is the {"decision","reason"} answer of Claude Code's family of
// hooks.
type Decision struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
}

// InstallStyle is how `loopctl install` installs for a harness.
type InstallStyle int

const (
	// InstallHookFile: the gate in the harness's hook file, in the flat
	// shape {"version":1,"hooks":{"<event>":[{"command":...}]}}.
	InstallHookFile InstallStyle = iota
	// InstallPlugin: Claude Code's local plugin marketplace (user scope)
	// whose hooks carry the gate; the hook itself in the repository's
	// settings at project scope.
	InstallPlugin
	// InstallPackaged: the gate in the hook file in the grouped shape
	// ([{"hooks":[{command}]}]) and the prose packaged as the harness
	// loads it (Package).
	InstallPackaged
)

// Package is the packaging the prose (skill, commands) goes in, for
// InstallPackaged.
type Package int

const (
	// PackageNone: no packaged prose.
	PackageNone Package = iota
	// PackageMarketplace: a plugin in a local marketplace of the CLI's
	// own format, registered through the CLI.
	PackageMarketplace
	// PackageExtension: an extension directory the CLI loads from the
	// home directory.
	PackageExtension
)

// Install is a harness's install layout.
type Install struct {
	Style InstallStyle
	// HookFile is the hook file, slash-separated, under the home directory
	// (user scope) or the repository root (project scope).
	HookFile string
	// HomeEnv names a variable that, when it holds an absolute path, is
	// the user layer's directory instead of the home's (HookFile's base
	// name goes in it).
	HomeEnv string
	// HookEntry is the hook object for a command line, as key/value pairs
	// in order (InstallPackaged).
	HookEntry func(command string) []string
	// Package is where the prose goes (InstallPackaged).
	Package Package
	// Rule: a project gets the operating model as a rule file.
	Rule bool
	// ProjectNote is the warning after a project-scope install, a format
	// taking the hook file and the repository root ("": none).
	ProjectNote string
	// Note is said after every install ("": nothing).
	Note string
}

var registry = map[string]*Descriptor{}

// Register adds d to the registry. It panics on a bad or duplicate
// descriptor: registration happens from init, where a mistake is the
// program's, not the user's.
func Register(d *Descriptor) {
	if err := d.check(); err != nil {
		panic("harness.Register: " + err.Error())
	}
	if _, dup := registry[d.Name]; dup {
		panic("harness.Register: duplicate harness " + d.Name)
	}
	if d.Default {
		for _, o := range registry {
			if o.Default {
				panic("harness.Register: " + d.Name + " and " + o.Name + " are both the default")
			}
		}
	}
	registry[d.Name] = d
}

func (d *Descriptor) check() error {
	switch {
	case d == nil:
		return fmt.Errorf("nil descriptor")
	case !validName(d.Name):
		return fmt.Errorf("name %q: lower-case letters and digits, at most 32", d.Name)
	case d.Title == "" || d.Binary == "":
		return fmt.Errorf("%s: Title and Binary are required", d.Name)
	case d.Spawn == nil || d.OneShot == nil:
		return fmt.Errorf("%s: Spawn and OneShot are required", d.Name)
	case d.Resume == nil && d.ResumeRefusal == "":
		return fmt.Errorf("%s: without Resume, ResumeRefusal says why", d.Name)
	case d.Gate.Event == "" || d.Gate.Block == nil:
		return fmt.Errorf("%s: Gate.Event and Gate.Block are required", d.Name)
	case d.Install.HookFile == "":
		return fmt.Errorf("%s: Install.HookFile is required", d.Name)
	case d.Install.Style == InstallPackaged && (d.Install.HookEntry == nil || d.Install.Package == PackageNone):
		return fmt.Errorf("%s: a packaged install needs HookEntry and Package", d.Name)
	}
	return nil
}

func validName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// All is every registered harness, by Order then name. The slice is the
// caller's; the descriptors are shared and must not be changed.
func All() []*Descriptor {
	out := make([]*Descriptor, 0, len(registry))
	for _, d := range registry {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Order != out[j].Order {
			return out[i].Order < out[j].Order
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// ByName is the harness called name, or nil.
func ByName(name string) *Descriptor { return registry[name] }

// Known reports whether name is a registered harness.
func Known(name string) bool { return registry[name] != nil }

// Default is the harness used when none is named.
func Default() *Descriptor {
	for _, d := range registry {
		if d.Default {
			return d
		}
	}
	panic("harness: no default harness registered")
}

// Names are the registered harnesses' names, in All's order.
func Names() []string {
	all := All()
	out := make([]string, len(all))
	for i, d := range all {
		out[i] = d.Name
	}
	return out
}

// SortedNames are the names in alphabetical order.
func SortedNames() []string {
	out := Names()
	slices.Sort(out)
	return out
}

// List is names joined for a message: "a, b, c or d".
func List(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
