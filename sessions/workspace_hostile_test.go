package sessions

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// plantProgram writes a program that touches a marker file — what an agent
// would plant for loopd to run — and returns the marker and the program.
func plantProgram(t *testing.T) (marker, program string) {
	t.Helper()
	dir := t.TempDir()
	marker = filepath.Join(dir, "planted-program-ran")
	program = filepath.Join(dir, "bin", "evil")
	require.NoError(t, os.MkdirAll(filepath.Dir(program), 0o755))
	require.NoError(t, os.WriteFile(program, []byte("#!/bin/sh\ntouch "+marker+"\nexit 1\n"), 0o755))
	return marker, program
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.WriteString(text)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// naiveGit runs git as a person would in the checkout (no pins, only the
// test's empty global configuration): proof that what was planted is live.
func naiveGit(t *testing.T, env []string, dir string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), append(env, "GIT_TERMINAL_PROMPT=0")...)
	cmd.Stdin = strings.NewReader("protocol=https\nhost=example.com\n\n")
	_, _ = cmd.CombinedOutput() // it may well fail; the marker says whether the program ran
}

// unauthorized is an https remote that asks for credentials: a fetch from
// it is where git runs a credential helper.
func unauthorized(t *testing.T) string {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
		http.Error(w, "who are you", http.StatusUnauthorized)
	}))
	srv.TLS = &tls.Config{}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL + "/octo/repo.git"
}

// The agent writes, into its own clone's .git/config (and, where it could
// reach it, the mirror's), each key that makes git run a program; then
// every git operation loopd does — a second item's clone of the same
// repository, a refresh, a pull request's head, reading the branch and
// the origin, fetches over ssh and from an https remote asking for
// credentials, removing a checkout — must never run it. Each case then
// proves its plant was live by running plain git the way a person would.
func TestWorkspaceGitNeverRunsWhatTheAgentPlanted(t *testing.T) {
	t.Parallel()
	requireTool(t, "ssh")
	type plant struct {
		config     string            // appended to the clone's and the mirror's config
		files      map[string]string // written into the clone's work tree
		commit     bool              // and committed
		originTree map[string]string // committed to origin before the first clone
		trigger    []string          // a plain git command in the clone that runs the plant
	}
	for name, mk := range map[string]func(evil, dir string) plant{
		"core.fsmonitor": func(evil, _ string) plant {
			return plant{config: "[core]\n\tfsmonitor = " + evil + "\n", trigger: []string{"status"}}
		},
		"remote.origin.uploadpack": func(evil, _ string) plant {
			return plant{config: "[remote \"origin\"]\n\tuploadpack = " + evil + "\n\treceivepack = " + evil + "\n", trigger: []string{"fetch", "origin"}}
		},
		"core.sshCommand": func(evil, _ string) plant {
			return plant{config: "[core]\n\tsshCommand = " + evil + "\n", trigger: []string{"ls-remote", "ssh://nonexistent.invalid/octo/repo.git"}}
		},
		"smudge filter via .gitattributes": func(evil, _ string) plant {
			return plant{
				config:     "[filter \"evil\"]\n\tsmudge = " + evil + "\n\tclean = " + evil + "\n",
				files:      map[string]string{".gitattributes": "* filter=evil\n*.txt filter=evil\n"},
				commit:     true,
				originTree: map[string]string{".gitattributes": "* filter=evil\n", "data.txt": "data\n"},
				trigger:    []string{"checkout", "--force", "HEAD~1", "--", "README.md"},
			}
		},
		"smudge filter via core.attributesFile": func(evil, dir string) plant {
			attrs := filepath.Join(dir, "attributes")
			_ = os.WriteFile(attrs, []byte("* filter=evil\n"), 0o644)
			return plant{
				config:  "[core]\n\tattributesFile = " + attrs + "\n[filter \"evil\"]\n\tsmudge = " + evil + "\n\tclean = " + evil + "\n",
				trigger: []string{"add", "--all"},
			}
		},
		"include.path": func(evil, dir string) plant {
			inc := filepath.Join(dir, "included")
			_ = os.WriteFile(inc, []byte("[core]\n\tfsmonitor = "+evil+"\n\tsshCommand = "+evil+"\n[remote \"origin\"]\n\tuploadpack = "+evil+"\n"), 0o644)
			return plant{config: "[include]\n\tpath = " + inc + "\n", trigger: []string{"status"}}
		},
		"core.hooksPath and a hook": func(evil, dir string) plant {
			hooks := filepath.Join(dir, "hooks")
			_ = os.MkdirAll(hooks, 0o755)
			for _, h := range []string{"reference-transaction", "post-checkout", "pre-auto-gc", "post-merge", "pre-push", "post-rewrite"} {
				_ = os.WriteFile(filepath.Join(hooks, h), []byte("#!/bin/sh\nexec "+evil+"\n"), 0o755)
			}
			return plant{config: "[core]\n\thooksPath = " + hooks + "\n", trigger: []string{"update-ref", "refs/heads/planted", "HEAD"}}
		},
		"diff.external": func(evil, _ string) plant {
			return plant{config: "[diff]\n\texternal = " + evil + "\n", files: map[string]string{"README.md": "changed\n"}, trigger: []string{"diff"}}
		},
		"core.editor": func(evil, _ string) plant {
			return plant{config: "[core]\n\teditor = " + evil + "\n[sequence]\n\teditor = " + evil + "\n", trigger: []string{"commit", "--allow-empty"}}
		},
		"gpg.program and commit.gpgSign": func(evil, _ string) plant {
			return plant{config: "[gpg]\n\tprogram = " + evil + "\n[commit]\n\tgpgSign = true\n[log]\n\tshowSignature = true\n", trigger: []string{"commit", "--allow-empty", "-m", "signed"}}
		},
		"protocol.allow and an ext:: remote": func(evil, _ string) plant {
			return plant{config: "[protocol]\n\tallow = always\n[protocol \"ext\"]\n\tallow = always\n", trigger: []string{"ls-remote", "ext::" + evil}}
		},
		"credential.helper": func(evil, _ string) plant {
			return plant{
				config:  "[credential]\n\thelper = !" + evil + "\n[credential \"https://127.0.0.1\"]\n\thelper = !" + evil + "\n[http]\n\tsslVerify = false\n",
				trigger: []string{"credential", "fill"},
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			env := gitEnv(t)
			marker, evil := plantProgram(t)
			pl := mk(evil, t.TempDir())
			origin := newOrigin(t, env, "pr-work")
			gitTest(t, env, origin, "update-ref", "refs/pull/9/head", "refs/heads/pr-work")
			if len(pl.originTree) > 0 {
				seed := filepath.Join(t.TempDir(), "seed")
				gitTest(t, env, filepath.Dir(seed), "clone", "--quiet", origin, seed)
				for f, body := range pl.originTree {
					require.NoError(t, os.WriteFile(filepath.Join(seed, f), []byte(body), 0o644))
				}
				gitTest(t, env, seed, "add", ".")
				gitTest(t, env, seed, "commit", "--quiet", "-m", "attributes")
				gitTest(t, env, seed, "push", "--quiet", "origin", "HEAD:main")
			}
			w := newTestWorkspaces(t, env)
			first, err := w.Prepare(ctx, mustItem(t, "github:octo/repo#1"), PrepareOptions{CloneURL: origin})
			require.NoError(t, err)

			// The agent plants, in its clone and in the mirror.
			for _, gitdir := range []string{filepath.Join(first.Dir, ".git"), first.Mirror} {
				appendFile(t, filepath.Join(gitdir, "config"), pl.config)
				appendFile(t, filepath.Join(gitdir, "config"), "[remote \""+origin+"\"]\n\tuploadpack = "+evil+"\n")
				require.NoError(t, os.MkdirAll(filepath.Join(gitdir, "hooks"), 0o755))
				for _, h := range []string{"reference-transaction", "post-checkout", "pre-auto-gc"} {
					require.NoError(t, os.WriteFile(filepath.Join(gitdir, "hooks", h), []byte("#!/bin/sh\nexec "+evil+"\n"), 0o755))
				}
			}
			for f, body := range pl.files {
				require.NoError(t, os.WriteFile(filepath.Join(first.Dir, f), []byte(body), 0o644))
			}
			if pl.commit {
				// Committed too, so that an attribute is in the tree as well.
				safe := []string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "filter.evil.clean=cat", "-c", "filter.evil.smudge=cat"}
				gitTest(t, env, first.Dir, append(safe, "add", "--all")...)
				gitTest(t, env, first.Dir, append(safe, "commit", "--quiet", "-m", "agent's change")...)
				require.NoFileExists(t, marker, "set-up ran the plant")
			}

			// Every operation loopd does.
			second, err := w.Prepare(ctx, mustItem(t, "github:octo/repo#2"), PrepareOptions{CloneURL: origin})
			require.NoError(t, err, "a second item of the same repository is prepared")
			if len(pl.originTree) > 0 {
				require.FileExists(t, filepath.Join(second.Dir, "data.txt"), "checked out without the filter")
			}
			again, err := w.Prepare(ctx, mustItem(t, "github:octo/repo#1"), PrepareOptions{CloneURL: origin})
			require.NoError(t, err)
			require.True(t, again.Reused)
			require.NoError(t, again.FetchErr, "the refresh fetched")
			_, err = w.Prepare(ctx, mustItem(t, "github:octo/repo#9"), PrepareOptions{CloneURL: origin, Branch: "pr-9", FetchRef: "refs/pull/9/head", RequireBranch: true})
			require.NoError(t, err)
			_, err = CheckedOutBranch(first.Dir)
			require.NoError(t, err)
			_, _ = OriginURL(first.Dir) // refused when the agent added an include; never runs git
			viaSSH, err := w.Prepare(ctx, mustItem(t, "github:octo/repo#1"), PrepareOptions{CloneURL: "ssh://nonexistent.invalid/octo/repo.git"})
			require.NoError(t, err)
			require.Error(t, viaSSH.FetchErr, "no such ssh host")
			viaHTTPS, err := w.Prepare(ctx, mustItem(t, "github:octo/repo#1"), PrepareOptions{CloneURL: unauthorized(t)})
			require.NoError(t, err)
			require.Error(t, viaHTTPS.FetchErr, "the remote wants credentials nobody gives")
			require.NoError(t, w.Remove(ctx, mustItem(t, "github:octo/repo#2")))

			require.NoFileExists(t, marker, "loopd ran the program the agent planted (%s)", name)

			// The plant was live: plain git in the agent's clone runs it.
			cmd := pl.trigger
			if name == "credential.helper" {
				cmd = []string{"ls-remote", unauthorized(t)}
			}
			naiveGit(t, env, first.Dir, cmd...)
			require.FileExists(t, marker, fmt.Sprintf("the plant of %s never runs, so this case proves nothing: git %v", name, cmd))
		})
	}
}
