package harness

// Cursor is cursor-agent. Its interactive mode is hosted like Claude Code's,
// but it cannot be told the conversation id to use, so a respawn starts a
// fresh conversation pointed at the work item's artifacts. Its one-shot
// takes the prompt as an argument: callers pass only text theloop
// composed, and a prompt starting with "-" is refused. Its stop hook reads
// {"followup_message":...}, which sends the agent on.
var Cursor = &Descriptor{
	Name:          "cursor",
	Title:         "Cursor",
	Binary:        "cursor-agent",
	Order:         2,
	Spawn:         func(string) []string { return nil },
	ResumeRefusal: "cursor-agent cannot be given the chat id to resume",
	OneShot: func(prompt, model string, extra []string) ([]string, bool) {
		args := append([]string{"-p", prompt, "--output-format", "json"}, extra...)
		if model != "" {
			args = append(args, "-m", model)
		}
		return args, false
	},
	Gate: Gate{
		Event: "stop",
		Block: func(reason string) any {
			return struct {
				FollowupMessage string `json:"followup_message"`
			}{reason}
		},
	},
	Install: Install{Style: InstallHookFile, HookFile: ".cursor/hooks.json", Rule: true},
	Egress:  []string{"api2.cursor.sh", "api.cursor.sh", "repo42.cursor.sh", "api3.cursor.sh"},
	Degrades: []string{
		"a respawn starts a new conversation (no resume by id)",
		"the one-shot prompt is on the command line",
		"no project directory in the hook's environment: a project-scope gate runs loop-gate from PATH",
	},
}

func init() { Register(Cursor) }
