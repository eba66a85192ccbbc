package run

import (
	"os"
	"sort"
	"strings"
)

// baseEnv names the variables of the caller's environment every program
// keeps by default: what a shell, a terminal program, git and tmux need to
// work, nothing that authenticates anyone. LC_* is kept as a prefix.
// TMUX_TMPDIR is kept so that every tmux client finds the server the first
// one started.
var baseEnv = [...]string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TZ", "TMPDIR", "TMUX_TMPDIR"}

// BaseEnv returns the names of the variables a program keeps by default
// (besides LC_*). The list is an allowlist: a variable nobody named is not
// passed, whatever it holds (docs/decisions.md §22).
func BaseEnv() []string { return append([]string(nil), baseEnv[:]...) }

// AllowedEnv filters environ (KEY=VALUE entries, as os.Environ returns
// them) down to BaseEnv, LC_* and the names in keep, in a stable order,
// first occurrence of a name winning. It is the environment Exec gives a
// program when its Environ is nil.
func AllowedEnv(environ, keep []string) []string {
	allow := make(map[string]bool, len(baseEnv)+len(keep))
	for _, n := range baseEnv {
		allow[n] = true
	}
	for _, n := range keep {
		allow[n] = true
	}
	seen := map[string]bool{}
	var out []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || seen[k] || !(allow[k] || strings.HasPrefix(k, "LC_") && validEnvName(k)) {
			continue
		}
		seen[k] = true
		out = append(out, kv)
	}
	sort.Strings(out)
	return out
}

// Passthrough returns this process's KEY=VALUE entries for the named
// variables that are set: how a caller hands a program one variable beyond
// BaseEnv explicitly (gh its token, git fetching over ssh its agent socket),
// in Cmd.Env.
func Passthrough(names ...string) []string {
	var out []string
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			out = append(out, n+"="+v)
		}
	}
	return out
}

// InheritEnv is an Exec.Environ that passes this process's whole
// environment: for a command-line tool run by the operator for the
// operator (loopctl running gh, claude or a repository's tests in CI),
// never for a program loopd starts.
func InheritEnv() []string { return os.Environ() }

func validEnvName(n string) bool {
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
