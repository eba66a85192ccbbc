package harness

import "time"

// Gemini is the Gemini CLI (program "gemini"). Like Claude Code it takes
// the conversation id up front and resumes it by id (within the working
// directory's project); --skip-trust trusts the checkout for the session,
// since an untrusted folder stops at a dialog nobody in the pane answers.
// Its gate is the AfterAgent hook: {"decision":"deny","reason":...} rejects
// the response and sends the reason as the next prompt ("block" is its
// alias). Any exit code but 0 and 1 blocks, with stderr as the reason, so
// the gate answers 0 (or 1 for bad usage) and hides a crash's text.
var Gemini = &Descriptor{
	Name:   "gemini",
	Title:  "Gemini CLI",
	Binary: "gemini",
	Order:  4,
	Spawn:  func(id string) []string { return []string{"--session-id", id, "--skip-trust"} },
	Resume: func(id string) []string { return []string{"--resume", id, "--skip-trust"} },
	OneShot: func(_, model string, extra []string) ([]string, bool) {
		args := append([]string{"-o", "json"}, extra...)
		if model != "" {
			args = append(args, "-m", model)
		}
		return args, true
	},
	// The Gemini CLI (0.61) drops an Enter that reaches its input within
	// 40 ms of a paste it cannot trust (any terminal without the kitty
	// keyboard protocol, tmux included) as part of the paste. The pause
	// runs from the moment the text is seen on the screen, so a busy
	// machine cannot shrink it.
	SubmitGap: 150 * time.Millisecond,
	// A project's .gemini/settings.json (and its gate) loads only in a
	// folder trusted before the CLI starts; --skip-trust alone does not.
	Prepare: PrepareTrustedFolders,
	Gate: Gate{
		Event:            "AfterAgent",
		Block:            func(reason string) any { return Decision{"deny", reason} },
		CrashTextBlocks:  true,
		ProjectDirVar:    "GEMINI_PROJECT_DIR",
		ProjectDirInText: true,
	},
	Install: Install{
		Style:    InstallPackaged,
		HookFile: ".gemini/settings.json",
		HookEntry: func(cmd string) []string {
			return []string{"name", "loop-gate", "type", "command", "command", cmd, "description", "theloop: keeps the agent on a node that is not done"}
		},
		Package:     PackageExtension,
		ProjectNote: "the Gemini CLI loads the hooks in %s only in a folder it trusts: trust %s when gemini asks (or in ~/.gemini/trustedFolders.json); `gemini --skip-trust` does not load them. loopd marks its own sessions' checkouts trusted; --scope user loads everywhere.",
	},
	Egress: []string{"generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "oauth2.googleapis.com", "www.googleapis.com"},
	Degrades: []string{
		"a project-scope gate loads only in a folder marked trusted before the CLI starts",
	},
}

func init() { Register(Gemini) }
