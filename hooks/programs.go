package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/harness"
)

// DefaultTestTimeout bounds verify-tests unless the reference sets
// timeoutSeconds or the harness config verification.timeout.
const DefaultTestTimeout = 900 * time.Second

// MaxTestTimeout is the longest a test run may be given; verify-tests'
// own deadline is a minute beyond it.
const MaxTestTimeout = 2 * time.Hour

// SplitWords splits a command string into words the way a POSIX shell would
// for plain words and quotes — with no expansion of any kind. The graph
// declares commands; nothing from a ticket ever reaches them.
func SplitWords(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped = true
			inWord = true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote = r
			inWord = true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote")
	}
	if escaped {
		return nil, errors.New("trailing backslash")
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

func commandArgv(v any) ([]string, error) {
	switch t := v.(type) {
	case string:
		return SplitWords(t)
	default:
		return graph.AsStrings(t), nil
	}
}

// tailLines returns up to n last non-empty lines of stdout (or stderr when
// stdout is empty) as info messages. Test output is the repository's own
// text, produced by the declared command — not ticket text.
func tailLines(stdout, stderr []byte, n int) []graph.Message {
	src := string(stdout)
	if strings.TrimSpace(src) == "" {
		src = string(stderr)
	}
	var lines []string
	for _, l := range strings.Split(src, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, strings.TrimRight(l, " \r\t"))
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := make([]graph.Message, len(lines))
	for i, l := range lines {
		out[i] = graph.Message{Text: l, Severity: graph.SeverityInfo}
	}
	return out
}

// mcpCall delegates an MCP tool call to the harness in one-shot JSON mode,
// asking for {ok, result}. Not used by the shipped graphs.
func mcpCall(ctx context.Context, hc *graph.HookContext) graph.HookResult {
	tool := hc.Params.String("tool")
	if tool == "" {
		return graph.Skip("no tool named")
	}
	if hc.Mode == graph.ModeCheck {
		return graph.Skip("mcp-call does not run under check")
	}
	if hc.Commands == nil {
		r := graph.Block(graph.Finding("mcp-call needs a command runner to reach the harness", ""))
		r.Retriable = false
		return r
	}
	args, _ := json.Marshal(hc.Params["arguments"])
	prompt := fmt.Sprintf("Call the MCP tool %q with these JSON arguments: %s. Reply with only a JSON object {\"ok\": boolean, \"result\": string}.", tool, args)
	// The command runner has no standard input, so the prompt goes on the
	// command line: a harness whose one-shot takes it there runs its own
	// one-shot; any other, the default harness given the prompt after -p.
	d := harness.ByName(hc.Params.StringOr("harness", harness.Default().Name))
	if d == nil {
		d = harness.Default()
	}
	oneShot, onStdin := d.OneShot(prompt, "", nil)
	if onStdin {
		d = harness.Default()
		oneShot = []string{"-p", prompt, "--output-format", "json"}
	}
	argv := append([]string{d.Binary}, oneShot...)
	cctx, cancel := context.WithTimeout(ctx, hc.Params.Duration("timeoutSeconds", 300*time.Second))
	defer cancel()
	res, err := hc.Commands.Run(cctx, argv, "")
	switch {
	case errors.Is(err, graph.ErrCommandNotFound):
		r := graph.Block(graph.Finding("harness not found: "+argv[0], ""))
		r.Retriable = false
		return r
	case err != nil || res.ExitCode != 0:
		return graph.Block(graph.Finding("the harness did not complete the MCP call to "+tool, ""))
	}
	ok, result := parseMCPReply(res.Stdout)
	if !ok {
		return graph.Block(graph.Finding("the MCP call to "+tool+" did not report ok", ""))
	}
	return graph.Pass(map[string]any{"result": result})
}

// parseMCPReply reads {ok, result}, either directly or inside a harness
// envelope's "result" string.
func parseMCPReply(out []byte) (bool, string) {
	var direct struct {
		OK     *bool  `json:"ok"`
		Result string `json:"result"`
	}
	if json.Unmarshal(out, &direct) == nil && direct.OK != nil {
		return *direct.OK, direct.Result
	}
	if direct.Result != "" {
		var inner struct {
			OK     *bool  `json:"ok"`
			Result string `json:"result"`
		}
		s := strings.TrimSpace(direct.Result)
		s = strings.TrimPrefix(strings.TrimSuffix(strings.TrimPrefix(s, "```json"), "```"), "```")
		if json.Unmarshal([]byte(strings.TrimSpace(s)), &inner) == nil && inner.OK != nil {
			return *inner.OK, inner.Result
		}
	}
	return false, ""
}
