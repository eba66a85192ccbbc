package integrations

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fake gh: a sh script named gh, written into t.TempDir() and put first
// on PATH, that re-executes this test binary in "fake gh" mode. In that mode
// the binary behaves like `gh api --include`: it forwards the request to
// FAKE_GH_UPSTREAM (a fakeGitHub), prints the answer in gh's --include
// format, exits 1 on a status above 299 like gh does, and appends its argv
// and stdin to FAKE_GH_LOG. FAKE_GH_SCENARIO makes it misbehave.

const fakeGhModeEnv = "THELOOP_FAKE_GH_MODE"

func TestMain(m *testing.M) {
	if os.Getenv(fakeGhModeEnv) == "1" {
		os.Exit(fakeGhMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeGhCall is one recorded invocation.
type fakeGhCall struct {
	Args  []string `json:"args"`
	Stdin string   `json:"stdin"`
}

func fakeGhMain(args []string) int {
	stdin, _ := io.ReadAll(os.Stdin)
	if logPath := os.Getenv("FAKE_GH_LOG"); logPath != "" {
		if f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			_ = json.NewEncoder(f).Encode(fakeGhCall{Args: args, Stdin: string(stdin)})
			_ = f.Close()
		}
	}
	switch os.Getenv("FAKE_GH_SCENARIO") {
	case "not-logged-in":
		fmt.Fprintln(os.Stderr, "To get started with GitHub CLI, please run:  gh auth login")
		fmt.Fprintln(os.Stderr, "Alternatively, populate the GH_TOKEN environment variable with a GitHub API authentication token.")
		return 4
	case "echo-token":
		fmt.Fprintf(os.Stderr, "error connecting to api.github.com with token %s\n", os.Getenv("GH_TOKEN"))
		return 1
	case "garbage":
		fmt.Println("this is not an HTTP answer")
		return 0
	}
	if len(args) == 0 || args[0] != "api" {
		fmt.Fprintln(os.Stderr, "fake gh: only `gh api` is implemented")
		return 2
	}
	method, path, input := "GET", "", false
	var headers []string
	for i := 1; i < len(args); i++ {
		switch a := args[i]; a {
		case "--include":
		case "--method":
			i++
			method = args[i]
		case "--hostname":
			i++
		case "-H":
			i++
			headers = append(headers, args[i])
		case "--input":
			i++
			if args[i] != "-" {
				fmt.Fprintln(os.Stderr, "fake gh: --input must be -")
				return 2
			}
			input = true
		default:
			if strings.HasPrefix(a, "-") || path != "" {
				fmt.Fprintf(os.Stderr, "fake gh: unexpected argument %q\n", a)
				return 2
			}
			path = a
		}
	}
	up := os.Getenv("FAKE_GH_UPSTREAM")
	target := up + "/" + path
	if path == "graphql" {
		// gh's GraphQL endpoint: /graphql, or /api/graphql on Enterprise.
		target = up + "/graphql"
		if strings.HasSuffix(up, "/api/v3") {
			target = strings.TrimSuffix(up, "/api/v3") + "/api/graphql"
		}
	}
	var body io.Reader
	if input {
		body = strings.NewReader(string(stdin))
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake gh:", err)
		return 1
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	req.Header.Set("Authorization", "token "+os.Getenv("FAKE_GH_TOKEN"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error connecting to the API:", err)
		return 1
	}
	defer resp.Body.Close()
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, resp.Proto, resp.Status)
	var names []string
	for k := range resp.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(out, "%s: %s\r\n", k, strings.Join(resp.Header[k], ", "))
	}
	fmt.Fprint(out, "\r\n")
	b, _ := io.ReadAll(resp.Body)
	_, _ = out.Write(b)
	_ = out.Flush()
	if resp.StatusCode > 299 {
		var e struct{ Message string }
		_ = json.Unmarshal(b, &e)
		fmt.Fprintf(os.Stderr, "gh: %s (HTTP %d)\n", e.Message, resp.StatusCode)
		return 1
	}
	return 0
}

// fakeGh is the installed fake; log reads what it recorded.
type fakeGh struct {
	dir, log        string
	upstream, token string
}

// installFakeGh writes the gh script, puts it first on PATH and points it at
// upstream (a REST root). Tests using it must not run in parallel (t.Setenv).
// gh gets an allowlisted environment (the GH_* variables it reads, nothing
// of the test's FAKE_GH_*), so the script carries its settings itself.
func installFakeGh(t *testing.T, upstream, token string) *fakeGh {
	t.Helper()
	dir := t.TempDir()
	fg := &fakeGh{dir: dir, log: filepath.Join(dir, "calls.jsonl"), upstream: upstream, token: token}
	fg.write(t, "")
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("GH_PATH", "")
	lastFakeGh = fg
	return fg
}

// lastFakeGh is the fake the running (serial) test installed last.
var lastFakeGh *fakeGh

// setFakeGhScenario makes the fake installed last misbehave.
func setFakeGhScenario(t *testing.T, scenario string) {
	t.Helper()
	require.NotNil(t, lastFakeGh, "installFakeGh first")
	lastFakeGh.write(t, scenario)
}

func (g *fakeGh) write(t *testing.T, scenario string) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	script := "#!/bin/sh\n" + fakeGhModeEnv + "=1\nexport " + fakeGhModeEnv + "\n" +
		"FAKE_GH_UPSTREAM=" + q(g.upstream) + " FAKE_GH_TOKEN=" + q(g.token) + " FAKE_GH_LOG=" + q(g.log) + " FAKE_GH_SCENARIO=" + q(scenario) + "\n" +
		"export FAKE_GH_UPSTREAM FAKE_GH_TOKEN FAKE_GH_LOG FAKE_GH_SCENARIO\n" +
		"exec " + q(exe) + " \"$@\"\n"
	tmp := filepath.Join(g.dir, ".gh.tmp")
	require.NoError(t, os.WriteFile(tmp, []byte(script), 0o755))
	require.NoError(t, os.Rename(tmp, filepath.Join(g.dir, "gh")))
}

func (g *fakeGh) calls(t *testing.T) []fakeGhCall {
	t.Helper()
	f, err := os.Open(g.log)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []fakeGhCall
	dec := json.NewDecoder(f)
	for {
		var c fakeGhCall
		if err := dec.Decode(&c); err != nil {
			break
		}
		out = append(out, c)
	}
	return out
}
