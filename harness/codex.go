package harness

// codexHookArgs turn the hooks feature on for the session and run the
// installed hooks without Codex's per-hook trust prompt: nobody is at the
// pane to answer it, and a hook that does not run is a gate that does not
// hold. Hooks of an untrusted project layer are still not loaded.
var codexHookArgs = []string{"--enable", "hooks", "--dangerously-bypass-hook-trust"}

// Codex is the OpenAI Codex CLI (program "codex"). Codex picks its own
// thread id, so theloop's session id names the registry record only; a
// respawn resumes with `codex resume --last`, the most recent conversation
// of the working directory — the work item's own checkout. Its one-shot is
// `codex exec --json … -` with the prompt on standard input. Its Stop hook
// (hooks.json) reads {"decision":"block","reason":...} with a non-empty
// reason, sent as the continuation prompt; exit 2 with stderr blocks too,
// other codes are a failed hook.
var Codex = &Descriptor{
	Name:   "codex",
	Title:  "Codex CLI",
	Binary: "codex",
	Order:  3,
	Spawn:  func(string) []string { return append([]string{}, codexHookArgs...) },
	Resume: func(string) []string { return append([]string{"resume", "--last"}, codexHookArgs...) },
	OneShot: func(_, model string, extra []string) ([]string, bool) {
		args := append([]string{"exec", "--json"}, extra...)
		if model != "" {
			args = append(args, "-m", model)
		}
		return append(args, "-"), true
	},
	Gate: Gate{
		Event: "Stop",
		Block: func(reason string) any { return Decision{"block", reason} },
	},
	Install: Install{
		Style:    InstallPackaged,
		HookFile: ".codex/hooks.json",
		HomeEnv:  "CODEX_HOME",
		HookEntry: func(cmd string) []string {
			return []string{"type", "command", "command", cmd, "statusMessage", "theloop: checking the work item's node"}
		},
		Package:     PackageMarketplace,
		Note:        "Codex runs a new or changed hook only once it is trusted: a plain `codex exec` skips it silently until you review it with /hooks in codex (or pass --dangerously-bypass-hook-trust, as loopd's sessions do).",
		ProjectNote: "the Codex CLI loads %s only for a project it trusts ([projects.%q] trust_level = \"trusted\" in ~/.codex/config.toml, which codex writes when you trust the folder); --scope user loads everywhere.",
	},
	Egress: []string{"api.openai.com", "chatgpt.com", "auth.openai.com"},
	Degrades: []string{
		"a respawn resumes the checkout's last conversation, not one named by id",
		"a new or changed hook runs only once trusted (sessions pass --dangerously-bypass-hook-trust)",
	},
}

func init() { Register(Codex) }
