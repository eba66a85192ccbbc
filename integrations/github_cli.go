package integrations

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/workitem"
)

// githubCLI is the cli transport: every exchange is one
// `gh api --include --method M [--hostname H] PATH` run through the command
// runner, so the request carries the operator's own gh login (GitHub
// Enterprise and SSO included) and gh picks the host's API root. A request
// body — comment text included — goes to `--input -` on stdin, never on the
// command line.
//
// gh is used as an authenticated HTTP pipe: with --include it prints the
// status line, headers and body, which this transport parses into the same
// response the api transport gets from net/http. Retries, pagination and
// decoding are then shared, so both transports answer identically.
type githubCLI struct {
	runner run.Runner
	binary string // resolved path of gh
	host   string // default --hostname ("" = gh's own default)
}

// ghEnv keeps gh non-interactive and its output plain.
var ghEnv = []string{"GH_PROMPT_DISABLED=1", "GH_NO_UPDATE_NOTIFIER=1", "GH_SPINNER_DISABLED=1", "NO_COLOR=1", "CLICOLOR=0"}

// ghPassEnv are the variables gh reads for its login, host, config and
// network, handed to it by name: a child gets the allowlist
// (run.BaseEnv) and what its caller names, never the whole environment
// (docs/decisions.md §22).
var ghPassEnv = []string{
	"GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN", "GH_HOST", "GH_CONFIG_DIR",
	"XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS",
	"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR",
}

func (c *githubCLI) name() string { return TransportCLI }

func (c *githubCLI) do(ctx context.Context, req ghRequest) (response, error) {
	args := []string{"api", "--include", "--method", req.method}
	host := req.host
	if host == "" {
		host = c.host
	}
	if host != "" {
		args = append(args, "--hostname", host)
	}
	args = append(args, "-H", "Accept: application/vnd.github+json", "-H", "X-GitHub-Api-Version: 2022-11-28")
	if req.body != nil {
		args = append(args, "--input", "-")
	}
	args = append(args, req.path)
	res, err := c.runner.Run(ctx, run.Cmd{Name: c.binary, Args: args, Stdin: req.body, Env: append(run.Passthrough(ghPassEnv...), ghEnv...)})
	if err != nil {
		var ee *run.ExitError
		switch {
		case errors.Is(err, run.ErrNotFound):
			return response{}, failFinal(ErrProviderUnavailable, "gh (%s) is not installed or not on PATH — install GitHub CLI and run `gh auth login`, or set integrations.github.cli.binary", c.binary)
		case ctx.Err() != nil || errors.Is(err, run.ErrTimeout):
			return response{}, context.DeadlineExceeded
		case !errors.As(err, &ee):
			return response{}, fail(ErrTransport, "running gh failed")
		}
	}
	if resp, perr := parseGhInclude(res.Stdout); perr == nil {
		return resp, nil
	}
	msg := ghStderr(res.Stderr)
	if res.ExitCode == 4 || strings.Contains(msg, "gh auth login") || strings.Contains(msg, "not logged in") {
		where := ""
		if host != "" {
			where = " --hostname " + host
		}
		return response{}, failFinal(ErrUnauthorized, "gh is not logged in — run `gh auth login%s` as the user theloop runs as", where)
	}
	if res.ExitCode == 0 {
		return response{}, fail(ErrTransport, "gh api printed no HTTP answer")
	}
	return response{}, fail(ErrTransport, "gh api failed without an HTTP answer (exit %d): %s", res.ExitCode, msg)
}

// ghStderr condenses gh's error output for a message.
func ghStderr(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if s == "" {
		return "no error output"
	}
	return clip(s, 300)
}

func (c *githubCLI) nextPath(link string) (string, error) {
	u, err := url.Parse(link)
	if err != nil || u.Host == "" {
		return "", fail(ErrTransport, "GitHub's next-page link is not a URL; refusing to follow it")
	}
	root := ""
	if p := u.EscapedPath(); p == "/api/v3" || strings.HasPrefix(p, "/api/v3/") {
		root = "/api/v3" // GitHub Enterprise Server's REST root
	}
	// The path goes back to gh, which sends it to the same host it just
	// answered from; no credential can follow the link elsewhere.
	return relativeAPIPath(u, root)
}

func (c *githubCLI) checkHost(string) error { return nil }

func (c *githubCLI) webHost(host string) string {
	switch {
	case host != "":
		return host
	case c.host != "":
		return c.host
	}
	return workitem.DefaultGitHubHost
}

func (c *githubCLI) authHint() string {
	if c.host != "" {
		return "run `gh auth login --hostname " + c.host + "` or `gh auth refresh`"
	}
	return "run `gh auth login` (add --hostname for GitHub Enterprise) or `gh auth refresh`"
}

// parseGhInclude parses the output of `gh api --include`: a status line
// ("HTTP/2.0 200 OK"), header lines, a blank line, then the body.
func parseGhInclude(out []byte) (response, error) {
	br := bufio.NewReader(bytes.NewReader(out))
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		return response{}, errors.New("no status line")
	}
	proto, rest, ok := strings.Cut(line, " ")
	if !ok || !strings.HasPrefix(proto, "HTTP/") {
		return response{}, errors.New("no HTTP status line")
	}
	codeText, _, _ := strings.Cut(rest, " ")
	code, err := strconv.Atoi(codeText)
	if err != nil || code < 100 || code > 599 {
		return response{}, fmt.Errorf("bad status code")
	}
	hdr, err := tp.ReadMIMEHeader()
	if err != nil && !errors.Is(err, io.EOF) {
		return response{}, errors.New("malformed headers")
	}
	body, err := io.ReadAll(br)
	if err != nil {
		return response{}, errors.New("unreadable body")
	}
	if len(body) > maxBody {
		return response{}, errors.New("body too large")
	}
	return response{status: code, header: http.Header(hdr), body: body}, nil
}

var _ githubTransport = (*githubCLI)(nil)
