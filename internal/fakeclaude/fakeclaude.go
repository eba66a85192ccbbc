// Package fakeclaude is a stand-in for the Claude Code CLI, for tests that
// drive real tmux sessions (sessions, the daemon, loopd). It is test support:
// no production code imports it.
//
// The fake is a bash script installed as <root>/bin/claude. It behaves enough
// like Claude Code for the session machinery: it records each start in
// <root>/argv.log as one tab-separated line
//
//	pid  cwd  mode  id  $THE_LOOP_WORK_ITEM  $THE_LOOP_SESSION_ID  args
//
// (mode is new, resume or fresh; id the conversation), remembers
// conversations under <root>/conversations (so --resume of a known id works
// and of an unknown one fails as Claude Code does), turns on bracketed paste,
// and appends every line it reads to <root>/received.log as "id<TAB>line",
// with the paste markers removed. A conversation file holding
// "crash-after-resume" makes a resume die after 0.6 s; the line "__DIE__"
// makes the fake exit.
package fakeclaude

import (
	"os"
	"path/filepath"
)

// Script is the fake's source.
const Script = `#!/usr/bin/env bash
root=$(cd "$(dirname "$0")/.." && pwd)
mode=fresh id=""
for ((i = 1; i <= $#; i++)); do
  case "${!i}" in
    --session-id) mode=new; j=$((i + 1)); id=${!j} ;;
    --resume) mode=resume; j=$((i + 1)); id=${!j} ;;
  esac
done
printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$$" "$PWD" "$mode" "$id" "${THE_LOOP_WORK_ITEM:-}" "${THE_LOOP_SESSION_ID:-}" "$*" >> "$root/argv.log"
if [ "$mode" = resume ] && [ ! -e "$root/conversations/$id" ]; then
  echo "No conversation found with session ID: $id"
  exit 1
fi
if [ "$mode" = resume ] && [ "$(cat "$root/conversations/$id")" = crash-after-resume ]; then
  sleep 0.6
  exit 4
fi
mkdir -p "$root/conversations" && : > "$root/conversations/$id"
echo "fake claude ($mode $id)"
printf '\033[?2004h'
while IFS= read -r line; do
  line=${line//$'\e[200~'/}
  line=${line//$'\e[201~'/}
  printf '%s\t%s\n' "$id" "$line" >> "$root/received.log"
  [ "$line" = "__DIE__" ] && exit 3
done
`

// Install writes the fake as root/bin/claude (creating root/bin) and returns
// its path. Put filepath.Dir of it first on PATH to have it found as claude.
func Install(root string) (string, error) { return InstallAs(root, "claude") }

// InstallAs writes the fake as root/bin/<name>, to stand in for another
// agent CLI (cursor-agent, codex, gemini) with the same records: Gemini's
// --session-id and --resume read as Claude Code's do; an argv without
// either (Cursor, Codex, `codex resume --last`) is mode fresh with an empty
// id.
func InstallAs(root, name string) (string, error) {
	dir := filepath.Join(root, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	return bin, os.WriteFile(bin, []byte(Script), 0o755)
}
