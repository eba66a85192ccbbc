package sandbox_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/sessions"
)

// The red-team suite (docs/decisions.md §22): a stand-in harness runs in a
// world built exactly as loopd builds one (sandbox.Worlds through
// sessions.Tmux), and from inside its pane tries every way out we know of.
// Each attempt is one line of its report, "name=ok" when it worked; every
// one must come back refused. A second session, started after the first
// poisoned what it could write, must not be reachable from the first, and
// nothing the first wrote may run outside its world.

// escapeProbe is the attacker. $1 is loopd's pid (as the host sees it),
// $2 a host TCP port (loopd's webhook, say), $3 the other session's
// checkout, $4 the allowed proxy host:port, $5 a refused one.
const escapeProbe = `#!/bin/bash
wt=$PWD out=$PWD/report st=$THE_LOOP_STATE_ROOT loopd=$1 port=$2 other=$3
try() { if "$@" >/dev/null 2>&1; then echo ok; else echo refused; fi; }
mark() { echo "touch $wt/ran-outside-\$(hostname)-$1"; }
{
echo "pid=$$"
echo "hostname=$(hostname)"
# loopd's world: state root, keys, socket, registry of others.
echo "signingkey=$(try cat "$st/keys/signing.key")"
echo "decisionkey=$(try cat "$st/decision-signing.key")"
echo "listroot=$(try sh -c 'ls "$1" | grep -q keys' - "$st")"
echo "loopdsock=$(try sh -c 'test -S "$1/loopd.sock"' - "$st")"
echo "otherregistry=$(try cat "$st/sessions/github-octo-demo-8.json")"
echo "ownregistry=$(try cat "$st/sessions/github-octo-demo-7.json")"
echo "otheroutbox=$(try sh -c 'echo intent >> "$1/intents.jsonl"' - "$st/outbox/sess-8")"
echo "outbox=$(try sh -c 'echo intent >> "$1/intents.jsonl"' - "$st/outbox/sess-7")"
echo "othercheckout=$(try touch "$other/pwned")"
echo "othercheckoutread=$(try ls "$other")"
echo "sshdir=$(try ls "$HOME/.ssh")"
echo "ghconfig=$(try cat "$HOME/.config/gh/hosts.yml")"
echo "otherharness=$(try sh -c 'find "$1" -path "*/home/*" 2>/dev/null | grep -q .' - "$6")"
echo "harnesswrite=$(try sh -c 'echo poisoned > "$HOME/.claude/settings.json"')"
# /proc of loopd, the launcher, the host's tmux.
echo "proclopd=$(try test -e /proc/$loopd/environ)"
echo "procloopdenv=$(if tr '\0' '\n' < /proc/$loopd/environ 2>/dev/null | grep -q FAKE-SECRET; then echo ok; else echo refused; fi)"
echo "procloopdmem=$(try head -c1 /proc/$loopd/mem)"
echo "procloopdmaps=$(try sh -c 'cat /proc/$1/maps | grep -q .' - $loopd)"
echo "procloopdfd=$(try ls /proc/$loopd/fd)"
echo "procpids=$(ls /proc | grep -c '^[0-9]')"
echo "ptraceparent=$(if command -v gdb >/dev/null; then try sh -c 'timeout 10 gdb -batch -p $1 -ex "info registers rip" 2>&1 | grep -q "^rip"' - $PPID; else try sh -c 'exec 3<"/proc/$1/mem"' - $PPID; fi)"
# Unix sockets and TCP ports of the host.
echo "hostsockets=$(find / -type s -not -path '/proc/*' 2>/dev/null | grep -v "^$7" | head -5 | tr '\n' ' ' | grep -q . && echo ok || echo refused)"
echo "hostport=$(try timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port")"
echo "egressallowed=$(try timeout 5 curl -fsS -x "$HTTPS_PROXY" "http://$4/allowed")"
echo "egressrefused=$(try timeout 5 curl -fsS -x "$HTTPS_PROXY" "http://$5/refused")"
echo "egressdirect=$(try timeout 3 curl -fsS --noproxy '*' "http://$4/allowed")"
# The session's own clone: configuration git would run.
echo "gitconfig=$(try sh -c 'echo "[core]" >> .git/config')"
echo "githooks=$(try sh -c 'echo "#!/bin/sh" > .git/hooks/post-checkout')"
echo "gitinfo=$(try sh -c 'echo "* filter=evil" > .git/info/attributes')"
echo "gitalternates=$(try sh -c 'mkdir -p .git/objects/info && echo / > .git/objects/info/alternates')"
echo "gitattributes=$(try sh -c 'echo "* filter=evil" > .gitattributes')"
# Links out of the checkout.
echo "symlinkout=$(try sh -c 'ln -sf "$1/keys/signing.key" link && cat link' - "$st")"
echo "hardlinkout=$(try ln "$st/keys/signing.key" hard)"
# The tmux server: every command that runs something runs in this world.
tmux run-shell "cat '$st/keys/signing.key' > '$wt/runshell.txt' 2>&1; hostname >> '$wt/runshell.txt'"
tmux new-window -d "cat '$st/keys/signing.key' > '$wt/newwindow.txt' 2>&1; hostname >> '$wt/newwindow.txt'"
echo "sessionsonserver=$(tmux list-sessions -F x | wc -l)"
echo "sendkeysother=$(try tmux send-keys -t "=loop-escape-8:" 'echo typed' Enter)"
# Turn loopd's own tmux client against it: detach-client -E runs a command
# in the client's place.
for i in $(seq 100); do [ -n "$(tmux list-clients -F x)" ] && break; sleep 0.1; done
echo "clients=$(tmux list-clients -F x | wc -l)"
for c in $(tmux list-clients -F '#{client_name}'); do tmux detach-client -t "$c" -E "$(mark detach)" ; done
sleep 0.5
} > "$out.tmp" 2>"$wt/probe.err"
mv "$out.tmp" "$out"
echo ready
while IFS= read -r line; do echo "got:$line" >> "$out"; done
`

type world struct {
	base, state, ws, wt7, wt8 string
	tm                        *sessions.Tmux
	worlds                    *sandbox.Worlds
	allowed, refused          string
	port                      int
	refusedLog                []string
	mu                        sync.Mutex
}

func needWorlds(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"tmux", "git", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed; .ci/run installs it", tool)
		}
	}
	if err := sandbox.CheckNamespaces(); err != nil {
		t.Skipf("the namespace sandbox cannot be built here (.ci/run installs bubblewrap): %v", err)
	}
	if !sandbox.Available() {
		t.Skip("this kernel offers no Landlock (the second layer)")
	}
}

func newWorld(t *testing.T) *world {
	t.Helper()
	needWorlds(t)
	base, err := os.MkdirTemp("", "wld")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	w := &world{base: base, state: filepath.Join(base, "state"), ws: filepath.Join(base, "ws")}
	w.wt7, w.wt8 = filepath.Join(w.ws, "wt7"), filepath.Join(w.ws, "wt8")
	home := filepath.Join(base, "home")
	for _, d := range []string{filepath.Join(w.state, "keys"), filepath.Join(w.state, "sessions"), filepath.Join(base, "bin"),
		filepath.Join(w.state, "outbox", "sess-7"), filepath.Join(w.state, "outbox", "sess-8"),
		filepath.Join(home, ".ssh"), filepath.Join(home, ".config", "gh"), filepath.Join(home, ".claude")} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	write := func(p, s string) { require.NoError(t, os.WriteFile(p, []byte(s), 0o600)) }
	write(filepath.Join(w.state, "keys", "signing.key"), "PRIVATE-KEY")
	write(filepath.Join(w.state, "decision-signing.key"), "PRIVATE-KEY")
	write(filepath.Join(w.state, "sessions", "github-octo-demo-7.json"), `{"item":"github:octo/demo#7"}`)
	write(filepath.Join(w.state, "sessions", "github-octo-demo-8.json"), `{"item":"github:octo/demo#8"}`)
	write(filepath.Join(home, ".ssh", "id_ed25519"), "SSH-KEY")
	write(filepath.Join(home, ".config", "gh", "hosts.yml"), "oauth_token: FAKE-SECRET")
	write(filepath.Join(home, ".claude", "settings.json"), `{"harness":"original"}`)
	for _, wt := range []string{w.wt7, w.wt8} {
		out, err := exec.Command("git", "init", "-q", wt).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	ln, err := net.Listen("unix", filepath.Join(w.state, "loopd.sock"))
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	require.NoError(t, os.WriteFile(filepath.Join(base, "bin", "harness"), []byte(escapeProbe), 0o755))

	// A host TCP service (loopd's webhook port) and two "internet" hosts
	// for the egress proxy: one allowed, one not.
	hostSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { fmt.Fprint(rw, "host") }))
	t.Cleanup(hostSrv.Close)
	w.port = hostSrv.Listener.Addr().(*net.TCPAddr).Port
	allowedSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { fmt.Fprint(rw, "allowed") }))
	t.Cleanup(allowedSrv.Close)
	w.allowed = allowedSrv.Listener.Addr().String()
	w.refused = hostSrv.Listener.Addr().String()

	for _, k := range []string{"THE_LOOP_GH_WEBHOOK_SECRET", "GH_TOKEN", "THE_LOOP_DASHBOARD_GH_TOKEN", "NATS_CREDS"} {
		t.Setenv(k, "FAKE-SECRET-"+k)
	}
	self, err := os.Executable()
	require.NoError(t, err)
	curl, _ := exec.LookPath("curl")
	c := &sandbox.Confiner{Self: self, StateRoot: w.state, WorkspaceRoot: w.ws,
		OutboxRoot: filepath.Join(w.state, "outbox"),
		Home:       home, Executables: []string{filepath.Join(base, "bin", "harness"), curl}}
	tmpDir := t.TempDir()
	w.worlds = &sandbox.Worlds{Confiner: c, Root: filepath.Join(base, "w"), AllowHosts: []string{w.allowed},
		ClientPaths: []string{tmpDir},
		Egress: &sandbox.Egress{Log: func(world, host string, port int, allowed bool) {
			if !allowed {
				w.mu.Lock()
				w.refusedLog = append(w.refusedLog, fmt.Sprintf("%s %s:%d", world, host, port))
				w.mu.Unlock()
			}
		}}}
	require.NoError(t, w.worlds.Prepare())
	t.Cleanup(func() { w.worlds.Egress.Close() })
	cfg := sessions.DefaultTmuxConfig()
	cfg.TempDir = tmpDir
	cfg.ReadySettle = 150 * time.Millisecond
	cfg.PollInterval = 20 * time.Millisecond
	w.tm, err = sessions.NewConfinedTmux(cfg, run.Exec{}, w.worlds)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, n := range []string{"loop-escape-7", "loop-escape-8"} {
			_ = w.tm.Kill(context.Background(), n)
		}
		w.tm.Close()
	})
	return w
}

func (w *world) spawn(t *testing.T, name, wt, reg, outbox string, args ...string) {
	t.Helper()
	require.NoError(t, w.tm.Spawn(context.Background(), sessions.SpawnSpec{Name: name, Cwd: wt,
		Env:          []string{"THE_LOOP_WORK_ITEM=7", "THE_LOOP_STATE_ROOT=" + w.state},
		Argv:         append(append([]string{filepath.Join(w.base, "bin", "harness")}, args...), w.worlds.Root, filepath.Dir(w.tm.SocketFor(name))),
		RegistryFile: filepath.Join(w.state, "sessions", reg), OutboxDir: filepath.Join(w.state, "outbox", outbox), Harness: "claude"}))
}

func readReport(t *testing.T, wt string) map[string]string {
	t.Helper()
	var report []byte
	require.Eventually(t, func() bool {
		var err error
		report, err = os.ReadFile(filepath.Join(wt, "report"))
		return err == nil
	}, 60*time.Second, 50*time.Millisecond, "the harness never wrote its report")
	got := map[string]string{}
	for _, l := range strings.Split(string(report), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	return got
}

func TestEscapeFromTheWorld(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	// The second session first, so the first has someone to attack.
	require.NoError(t, os.WriteFile(filepath.Join(w.base, "bin", "idle"), []byte("#!/bin/sh\necho ready\nexec cat\n"), 0o755))
	require.NoError(t, w.tm.Spawn(ctx, sessions.SpawnSpec{Name: "loop-escape-8", Cwd: w.wt8,
		Argv:         []string{filepath.Join(w.base, "bin", "idle")},
		RegistryFile: filepath.Join(w.state, "sessions", "github-octo-demo-8.json"), OutboxDir: filepath.Join(w.state, "outbox", "sess-8")}))
	require.NoError(t, w.tm.WaitReady(ctx, "loop-escape-8"))
	// loopd's control client is attached to the first session's server
	// while the attacker runs (a probe connects it).
	w.spawn(t, "loop-escape-7", w.wt7, "github-octo-demo-7.json", "sess-7",
		strconv.Itoa(os.Getpid()), strconv.Itoa(w.port), w.wt8, w.allowed, w.refused)
	_, err := w.tm.Probe(ctx, "loop-escape-7")
	require.NoError(t, err)
	got := readReport(t, w.wt7)
	errOut, _ := os.ReadFile(filepath.Join(w.wt7, "probe.err"))
	t.Logf("report: %v\nstderr: %s", got, errOut)

	mustBe := func(key, want, why string) {
		t.Helper()
		require.Equal(t, want, got[key], "%s: %s", key, why)
	}
	for _, k := range []string{"signingkey", "decisionkey", "listroot", "loopdsock", "otherregistry", "otheroutbox",
		"othercheckout", "othercheckoutread", "sshdir", "ghconfig", "otherharness",
		"proclopd", "procloopdenv", "procloopdmem", "procloopdmaps", "procloopdfd", "ptraceparent",
		"hostsockets", "hostport", "egressrefused", "egressdirect",
		"gitconfig", "githooks", "gitinfo", "gitalternates", "symlinkout", "hardlinkout", "sendkeysother"} {
		mustBe(k, "refused", "the attempt must be refused from inside the world")
	}
	// What the world is for still works.
	mustBe("ownregistry", "ok", "loop-gate reads the session's own registry entry")
	mustBe("outbox", "ok", "the claim is written to the session's own outbox")
	mustBe("egressallowed", "ok", "the harness reaches an allowed host through loopd's proxy")
	mustBe("harnesswrite", "ok", "the harness writes its own (private) config")
	mustBe("hostname", "theloop-agent", "the world has its own UTS namespace")
	mustBe("sessionsonserver", "1", "the world's tmux server hosts only its own session")
	mustBe("clients", "1", "loopd's control client was attached when the agent turned detach-client -E on it")
	n, err := strconv.Atoi(got["procpids"])
	require.NoError(t, err)
	require.Less(t, n, 20, "/proc shows only the world's processes")

	// tmux run-shell / new-window ran inside the same world: no key, the
	// world's hostname.
	for _, f := range []string{"runshell.txt", "newwindow.txt"} {
		var b []byte
		require.Eventually(t, func() bool {
			b, err = os.ReadFile(filepath.Join(w.wt7, f))
			return err == nil && strings.Contains(string(b), "theloop-agent")
		}, 20*time.Second, 50*time.Millisecond, "%s", f)
		require.NotContains(t, string(b), "PRIVATE-KEY", f)
	}
	// detach-client -E against loopd's own client ran nowhere outside.
	time.Sleep(time.Second)
	ents, _ := filepath.Glob(filepath.Join(w.wt7, "ran-outside-*"))
	for _, e := range ents {
		require.Contains(t, filepath.Base(e), "theloop-agent", "a command the agent wrote ran outside its world: %s", e)
	}
	// The harness's config outside the world is untouched.
	b, err := os.ReadFile(filepath.Join(w.base, "home", ".claude", "settings.json"))
	require.NoError(t, err)
	require.Equal(t, `{"harness":"original"}`, string(b))
	// The refusal was logged with its host.
	w.mu.Lock()
	require.NotEmpty(t, w.refusedLog, "the egress proxy logs every refused connection")
	w.mu.Unlock()
	// Delivery still works through loopd's (boxed) client.
	r, err := w.tm.Deliver(ctx, "loop-escape-7", "hello from loopd")
	require.NoError(t, err)
	require.True(t, r.Verified(), "%+v", r)
	// The other session is intact.
	_, err = os.Stat(filepath.Join(w.wt8, "pwned"))
	require.True(t, os.IsNotExist(err), "the other checkout was written")
	screen, err := w.tm.Capture(ctx, "loop-escape-8")
	require.NoError(t, err)
	require.NotContains(t, screen, "typed", "text was typed into the other session")
	// Killing ends the world.
	require.NoError(t, w.tm.Kill(ctx, "loop-escape-7"))
	l, err := w.tm.Probe(ctx, "loop-escape-7")
	require.NoError(t, err)
	require.Equal(t, sessions.LivenessAbsent, l)
}

// A session poisons everything it can write — links from its clone's git
// configuration to loopd's key, a process that tries to outlive its world —
// and is closed; the next session in the same checkout must see none of
// it: the links do not carry loopd's files in, the process is gone.
func TestEscapePoisonedRespawn(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	poison := `#!/bin/bash
st=$THE_LOOP_STATE_ROOT
rm -rf .git/config.orig; mv .git/config .git/config.orig 2>/dev/null
ln -sf "$st/keys/signing.key" .git/config 2>/dev/null || ln -sf "$st/keys/signing.key" poisoned-config
rm -rf .git/hooks 2>/dev/null; ln -sf "$st/keys" .git/hooks 2>/dev/null
ln -sf "$st/keys/signing.key" planted-link
( setsid bash -c 'trap "" HUP TERM; while :; do date +%s%N > heartbeat; sleep 0.1; done' </dev/null >/dev/null 2>&1 & )
echo poisoned > report
echo ready
exec cat
`
	require.NoError(t, os.WriteFile(filepath.Join(w.base, "bin", "poison"), []byte(poison), 0o755))
	spec := func(bin string) sessions.SpawnSpec {
		return sessions.SpawnSpec{Name: "loop-escape-7", Cwd: w.wt7,
			Env:          []string{"THE_LOOP_WORK_ITEM=7", "THE_LOOP_STATE_ROOT=" + w.state},
			Argv:         []string{filepath.Join(w.base, "bin", bin)},
			RegistryFile: filepath.Join(w.state, "sessions", "github-octo-demo-7.json"), OutboxDir: filepath.Join(w.state, "outbox", "sess-7"), Harness: "claude"}
	}
	require.NoError(t, w.tm.Spawn(ctx, spec("poison")))
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(w.wt7, "heartbeat"))
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "the poisoner never started its process")
	require.NoError(t, w.tm.Kill(ctx, "loop-escape-7"))
	// The detached process went with its world.
	hb := func() string { b, _ := os.ReadFile(filepath.Join(w.wt7, "heartbeat")); return string(b) }
	time.Sleep(500 * time.Millisecond)
	before := hb()
	time.Sleep(time.Second)
	require.Equal(t, before, hb(), "a process the agent detached outlived its world")

	reader := `#!/bin/bash
{
echo "config=$(cat .git/config 2>&1 | head -c 200 | tr '\n' ' ')"
echo "hooks=$(ls .git/hooks 2>&1 | tr '\n' ' ')"
echo "link=$(cat planted-link 2>&1 | tr '\n' ' ')"
} > report.tmp; mv report.tmp report
echo ready
exec cat
`
	require.NoError(t, os.WriteFile(filepath.Join(w.base, "bin", "reader"), []byte(reader), 0o755))
	require.NoError(t, os.Remove(filepath.Join(w.wt7, "report")))
	require.NoError(t, w.tm.Spawn(ctx, spec("reader")))
	got := readReport(t, w.wt7)
	t.Logf("second session saw: %v", got)
	for k, v := range got {
		require.NotContains(t, v, "PRIVATE-KEY", "%s: loopd's key reached the second world through a planted link", k)
	}
	fi, err := os.Lstat(filepath.Join(w.wt7, ".git", "config"))
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular(), "the planted .git/config link was replaced before the mount")
}

// A link planted as a parent of a read-only git path (.git/objects → a
// host directory) is replaced before loopd creates or mounts anything
// below it: nothing is made in, or mounted from, the link's target.
func TestGitReadOnlyParentLinkIsReplaced(t *testing.T) {
	w := newWorld(t)
	target := filepath.Join(w.base, "host-dir")
	require.NoError(t, os.MkdirAll(target, 0o700))
	objects := filepath.Join(w.wt7, ".git", "objects")
	require.NoError(t, os.RemoveAll(objects))
	require.NoError(t, os.Symlink(target, objects))
	require.NoError(t, os.WriteFile(filepath.Join(w.base, "bin", "idle"), []byte("#!/bin/sh\necho ready\nexec cat\n"), 0o755))
	require.NoError(t, w.tm.Spawn(context.Background(), sessions.SpawnSpec{Name: "loop-escape-7", Cwd: w.wt7,
		Argv:         []string{filepath.Join(w.base, "bin", "idle")},
		RegistryFile: filepath.Join(w.state, "sessions", "github-octo-demo-7.json"), OutboxDir: filepath.Join(w.state, "outbox", "sess-7")}))
	fi, err := os.Lstat(objects)
	require.NoError(t, err)
	require.True(t, fi.IsDir(), "the planted .git/objects link is a directory again")
	ents, err := os.ReadDir(target)
	require.NoError(t, err)
	require.Empty(t, ents, "nothing was created in the link's target")
}
