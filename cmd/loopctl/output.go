package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/template"

	"github.com/cli/go-gh/v2/pkg/term"
	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/internal/jq"
)

// One output vocabulary for every verb that prints data, gh's: --format
// table|json, plus --jq EXPR and --template TMPL over the JSON form. --jq
// and --template imply JSON.
//
// --jq is gh's --jq (internal/jq, on a copy of gojq whose builtin table
// is built on first use, not on every start). --template is text/template over the decoded JSON
// (fields by their JSON names, as in gh) with gh's small helpers (join,
// pluck, truncate), not go-gh's pkg/template: that one links sprig and a
// table printer whose package initialisers cost about 2 ms on every
// loopctl process (+25% on check --recompute, the CI and Stop-hook path).

// output is how a verb prints its data.
type output struct {
	JQ       string
	Template string
}

func outputFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "jq", Aliases: []string{"q"}, Usage: "filter the JSON output with a jq expression (implies --format json)"},
		&cli.StringFlag{Name: "template", Aliases: []string{"t"}, Usage: "format the JSON output with a Go template, as gh does (implies --format json)"},
	}
}

// readOutput reads --jq and --template. They imply json: format is set to
// json unless the user chose another format explicitly, which is refused.
func readOutput(c *cli.Context, verb string, format *string) (output, error) {
	o := output{JQ: c.String("jq"), Template: c.String("template")}
	if o.JQ == "" && o.Template == "" {
		return o, nil
	}
	if o.JQ != "" && o.Template != "" {
		return o, failWith(exitRefused, "loopctl %s: pass --jq or --template, not both", verb)
	}
	if format != nil {
		if c.IsSet("format") && *format != "json" {
			return o, failWith(exitRefused, "loopctl %s: --jq and --template read the JSON output; drop --format %s", verb, *format)
		}
		*format = "json"
	}
	return o, nil
}

// write prints v as indented JSON, or through --jq / --template.
func (o output) write(w io.Writer, v any) error {
	if o.JQ == "" && o.Template == "" {
		writeJSON(w, v)
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	if o.JQ != "" {
		if err := jq.Evaluate(buf.Bytes(), w, o.JQ); err != nil {
			return failWith(exitRefused, "loopctl: --jq: %v", err)
		}
		return nil
	}
	t, err := template.New("--template").Funcs(templateFuncs).Parse(o.Template)
	if err != nil {
		return failWith(exitRefused, "loopctl: --template: %v", err)
	}
	var data any
	if err := json.Unmarshal(buf.Bytes(), &data); err != nil {
		return err
	}
	if err := t.Execute(w, data); err != nil {
		return failWith(exitRefused, "loopctl: --template: %v", err)
	}
	return nil
}

// templateFuncs are gh's template helpers that need no library.
var templateFuncs = template.FuncMap{
	"join": func(sep string, list []any) string {
		parts := make([]string, len(list))
		for i, v := range list {
			parts[i] = fmt.Sprint(v)
		}
		return strings.Join(parts, sep)
	},
	"pluck": func(field string, list []any) []any {
		var out []any
		for _, v := range list {
			if m, ok := v.(map[string]any); ok {
				out = append(out, m[field])
			}
		}
		return out
	},
	"truncate": func(n int, v any) string {
		s := fmt.Sprint(v)
		if r := []rune(s); n > 0 && len(r) > n {
			return string(r[:max(0, n-1)]) + "…"
		}
		return s
	},
}

// detailWidth is how many runes a table's DETAIL cell may take: on a
// terminal (go-gh's detection, which honours GH_FORCE_TTY and the like),
// what is left of its width after the other columns; elsewhere (a pipe, a
// file, CI logs) 0, meaning uncut.
func detailWidth(w io.Writer) int {
	if f, ok := w.(*os.File); !ok || f != os.Stdout {
		return 0
	}
	t := term.FromEnv()
	if !t.IsTerminalOutput() {
		return 0
	}
	width, _, err := t.Size()
	if err != nil || width <= 0 {
		return 0
	}
	return max(60, width-50)
}
