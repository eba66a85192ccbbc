package sandbox

import (
	"fmt"
	"sort"
	"strings"

	"github.com/theloop-dev/theloop/internal/scrub"
	"github.com/theloop-dev/theloop/run"
)

// BaseEnv names the variables of loopd's environment a harness keeps: what
// a shell, a terminal program and a compiler need to work, nothing that
// authenticates anyone. LC_* is kept as a prefix (see keepName).
// TMUX_TMPDIR is kept so the tmux server loopd starts through the launcher
// puts its socket where loopd's own tmux clients look for it.
// The list is run's (run.BaseEnv), the one allowlist every child of loopd
// starts from.
var BaseEnv = run.BaseEnv()

// SessionEnv names the variables loopd itself sets per session (through
// tmux -e): which work item and conversation a session serves, and where
// loop-gate finds the session registry.
var SessionEnv = []string{"THE_LOOP_WORK_ITEM", "THE_LOOP_WORK_ITEM_REF", "THE_LOOP_SESSION_ID", "THE_LOOP_PR", "THE_LOOP_PR_REF", "THE_LOOP_STATE_ROOT"}

// SecretEnv names the variables loopd or an integration reads as a
// credential or as a trust anchor, which no agent may hold: the webhook
// secret, GitHub tokens (api transport and gh), the control plane's service
// token, Slack's bot token, webhook URL, app-level token and signing secret
// (integrations.slack and channels.slack), Jira's email and token, and the
// trust keys (an agent that sets THE_LOOP_TRUST_KEYS for its own loop-gate
// picks its own anchor). Operators' renamed variables (secretEnv, tokenEnv,
// urlEnv, emailEnv) are added by the caller of CheckAgentEnv.
var SecretEnv = scrub.CredentialEnv

// CheckAgentEnv refuses an operator's routing.agentEnv list that names a
// secret (SecretEnv or one of extraSecrets, the variables the operator's
// configuration points loopd and its integrations at), a session variable
// loopd sets itself, or something that is not a variable name. The error
// names the key and the offending entry.
func CheckAgentEnv(names, extraSecrets []string) error {
	secret := map[string]bool{}
	for _, n := range append(append([]string(nil), SecretEnv...), extraSecrets...) {
		if n != "" {
			secret[n] = true
		}
	}
	for _, n := range names {
		switch {
		case !validName(n):
			return fmt.Errorf("routing.agentEnv: %q is not an environment-variable name", n)
		case secret[n]:
			return fmt.Errorf("routing.agentEnv: %s is a secret loopd or an integration reads; the agent's session never gets it (docs/decisions.md §18) — remove it from routing.agentEnv", n)
		case strings.HasPrefix(n, "THE_LOOP_"):
			return fmt.Errorf("routing.agentEnv: %s is one of loopd's own variables; sessions get THE_LOOP_WORK_ITEM and the others from loopd, never from its environment — remove it from routing.agentEnv", n)
		}
	}
	return nil
}

// ChildEnv is the environment loopd gives the programs it runs for itself
// (tmux, git, a token command): environ (KEY=VALUE entries) filtered
// through the allowlist — run.BaseEnv, LC_* and the names in keep — with
// SecretEnv dropped even if keep names one. It is never environ minus a
// list: a variable nobody named does not pass (docs/decisions.md §22). A
// sandboxed agent that could read /proc/<pid>/environ of a same-user
// process outside its world finds nothing of loopd's there.
func ChildEnv(environ, keep []string) []string {
	secret := map[string]bool{}
	for _, n := range SecretEnv {
		secret[n] = true
	}
	var allowed []string
	for _, n := range keep {
		if !secret[n] {
			allowed = append(allowed, n)
		}
	}
	return run.AllowedEnv(environ, allowed)
}

func validName(n string) bool {
	if n == "" || n[0] >= '0' && n[0] <= '9' {
		return false
	}
	for _, r := range n {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Env filters environ (KEY=VALUE entries, as os.Environ returns them) down
// to BaseEnv, LC_* and the names in keep, in a stable order. Nothing else
// passes: a variable nobody listed is dropped, whatever it holds. keep must
// have passed CheckAgentEnv; Env drops SecretEnv names again regardless.
func Env(environ, keep []string) []string {
	allow := map[string]bool{}
	for _, n := range BaseEnv {
		allow[n] = true
	}
	for _, n := range keep {
		allow[n] = true
	}
	for _, n := range SecretEnv {
		delete(allow, n)
	}
	seen := map[string]bool{}
	var out []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || seen[k] || !(allow[k] || strings.HasPrefix(k, "LC_") && validName(k)) {
			continue
		}
		seen[k] = true
		out = append(out, kv)
	}
	sort.Strings(out)
	return out
}
