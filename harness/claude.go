package harness

// Claude is Claude Code (program "claude"), the default harness. It takes
// the conversation id up front (--session-id), so the id is recorded before
// the process starts, and resumes by id. Its one-shot reads the prompt on
// standard input, where no other process can see it and no argv limit
// applies. Its Stop hook reads {"decision":"block","reason":...}; exit 2
// would block too, so the gate never exits 2.
var Claude = &Descriptor{
	Name:    "claude",
	Title:   "Claude Code",
	Binary:  "claude",
	Default: true,
	Order:   1,
	Spawn:   func(id string) []string { return []string{"--session-id", id} },
	Resume:  func(id string) []string { return []string{"--resume", id} },
	OneShot: func(_, model string, extra []string) ([]string, bool) {
		args := append([]string{"-p", "--output-format", "json"}, extra...)
		if model != "" {
			args = append(args, "--model", model)
		}
		return args, true
	},
	Prepare:               PrepareConfigDir,
	TranscriptInConfigDir: true,
	Gate: Gate{
		Event:         "Stop",
		Block:         func(reason string) any { return Decision{"block", reason} },
		ProjectDirVar: "CLAUDE_PROJECT_DIR",
	},
	Install: Install{Style: InstallPlugin, HookFile: ".claude/settings.json"},
	Egress:  []string{"api.anthropic.com", "statsig.anthropic.com", "console.anthropic.com", "claude.ai"},
}

func init() { Register(Claude) }
