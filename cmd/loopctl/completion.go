package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/harness"
	"github.com/theloop-dev/theloop/loop"
)

// Shell completion. The scripts call `loopctl __complete WORD... CURRENT`
// (the words typed so far after "loopctl", then the word being completed,
// possibly empty) and offer its output, one candidate per line. The engine
// walks the command path like permute does, so positionals anywhere are
// understood; it offers the verb's own flags only, and dynamic values:
// work item ids, node ids, skip sets, shipped loops. It prints nothing for
// a value that is a path (the shell completes files) and never an error.

const completeVerb = "__complete"

func newCompletionCmd(f *Factory) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "bash|zsh|fish",
		Description: `Load completions in your shell:

   source <(loopctl completion bash)                       # bash, in ~/.bashrc
   source <(loopctl completion zsh)                        # zsh, in ~/.zshrc
   loopctl completion fish > ~/.config/fish/completions/loopctl.fish

Completion knows every verb's flags, and offers work item ids, node ids, skip
sets and shipped loops from the repository you are in.`,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return failWith(exitRefused, "loopctl completion: name one shell: bash, zsh or fish")
			}
			shell := c.Args().First()
			script, ok := completionScripts[shell]
			if !ok {
				return failWith(exitRefused, "loopctl completion: unknown shell %q; name bash, zsh or fish", shell)
			}
			_, err := io.WriteString(f.IO.Out, script)
			return err
		},
	}
}

var completionScripts = map[string]string{
	"bash": `# loopctl bash completion
_loopctl_complete() {
  local cur="${COMP_WORDS[COMP_CWORD]}" IFS=$'\n'
  COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:$((COMP_CWORD-1))}" "${cur}" 2>/dev/null)" -- "${cur}"))
}
complete -o default -F _loopctl_complete loopctl
`,
	"zsh": `#compdef loopctl
_loopctl() {
  local -a opts
  opts=("${(@f)$(${words[1]} __complete "${(@)words[2,CURRENT-1]}" "${words[CURRENT]}" 2>/dev/null)}")
  opts=(${opts:#})
  if (( ${#opts} )); then
    compadd -a opts
  else
    _files
  fi
}
compdef _loopctl loopctl
`,
	"fish": `# loopctl fish completion
function __loopctl_complete
    set -l tokens (commandline -opc)
    set -l out ($tokens[1] __complete $tokens[2..-1] (commandline -ct) 2>/dev/null)
    if test (count $out) -gt 0
        printf '%s\n' $out
    else
        __fish_complete_path (commandline -ct)
    end
end
complete -c loopctl -f -a '(__loopctl_complete)'
`,
}

// complete prints the candidates for the last of words.
func complete(app *cli.App, f *Factory, words []string) {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, typed := words[len(words)-1], words[:len(words)-1]
	if len(typed) > 0 && typed[0] == "help" {
		// help VERB...: verbs only.
		cmds := app.Commands
		for _, w := range typed[1:] {
			c := findCommand(cmds, w)
			if c == nil {
				return
			}
			cmds = c.Subcommands
		}
		for _, n := range commandNames(cmds) {
			if strings.HasPrefix(n, cur) {
				fmt.Fprintln(f.IO.Out, n)
			}
		}
		return
	}
	var path []*cli.Command
	cmds, flags := app.Commands, app.Flags
	var pos []string
	values := map[string]string{}
	for i := 0; i < len(typed); i++ {
		w := typed[i]
		if w == "--" {
			pos = append(pos, typed[i+1:]...)
			break
		}
		if strings.HasPrefix(w, "-") && w != "-" {
			name, val, hasVal := strings.Cut(strings.TrimLeft(w, "-"), "=")
			if fl := findFlag(flags, name); fl != nil && takesValue(flags, name) && !hasVal && i+1 < len(typed) {
				i++
				val = typed[i]
			}
			if fl := findFlag(flags, name); fl != nil {
				values[fl.Names()[0]] = val
			}
			continue
		}
		if len(pos) == 0 {
			if c := findCommand(cmds, w); c != nil {
				path = append(path, c)
				cmds, flags = c.Subcommands, c.Flags
				continue
			}
		}
		pos = append(pos, w)
	}
	out := f.IO.Out
	emit := func(cands []string) {
		for _, c := range cands {
			if strings.HasPrefix(c, cur) {
				fmt.Fprintln(out, c)
			}
		}
	}

	// The value of the flag just typed.
	if n := len(typed); n > 0 {
		prev := typed[n-1]
		if strings.HasPrefix(prev, "-") && !strings.Contains(prev, "=") {
			name := strings.TrimLeft(prev, "-")
			if fl := findFlag(flags, name); fl != nil && takesValue(flags, name) {
				emit(flagValues(f, fl.Names()[0], values, pos, path))
				return
			}
		}
	}
	if strings.HasPrefix(cur, "-") {
		if strings.Contains(cur, "=") {
			return // --flag=value: left to the shell
		}
		var names []string
		for _, fl := range flags {
			if h, ok := fl.(interface{ IsVisible() bool }); ok && !h.IsVisible() {
				continue
			}
			for _, n := range fl.Names() {
				if len(n) > 1 {
					names = append(names, "--"+n)
				}
			}
		}
		names = append(names, "--help")
		emit(names)
		return
	}
	if len(cmds) > 0 && len(pos) == 0 {
		names := commandNames(cmds)
		if len(path) == 0 {
			names = append(names, "help", "version")
		}
		emit(names)
		return
	}
	if len(path) > 0 {
		last := path[len(path)-1]
		switch {
		case last.Name == "completion" && len(pos) == 0:
			emit([]string{"bash", "zsh", "fish"})
		case strings.Contains(last.ArgsUsage, "WORK-ITEM") && len(pos) == 0 && values["work-item"] == "":
			emit(completionWorkItems(f, values))
		}
	}
}

func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, fl := range flags {
		if slices.Contains(fl.Names(), name) {
			return fl
		}
	}
	return nil
}

// flagValues are the candidates for flag's value (nil: a path or free
// text, which the shell completes or leaves alone).
func flagValues(f *Factory, flag string, values map[string]string, pos []string, path []*cli.Command) []string {
	switch flag {
	case "work-item":
		return completionWorkItems(f, values)
	case "loop":
		return loop.ShippedLoopNames()
	case "to", "node":
		g := completionGraph(f, values, pos)
		if g == nil {
			return nil
		}
		if flag == "node" {
			_, nodes := skippable(g)
			return nodes
		}
		return g.IDs()
	case "set":
		if g := completionGraph(f, values, pos); g != nil {
			sets, _ := skippable(g)
			return sets
		}
	case "format":
		if len(path) > 0 {
			return formatsOf(path[len(path)-1])
		}
	case "fail-on":
		return []string{"unmet", "block"}
	case "harness":
		return harness.Names()
	case "scope":
		return []string{"user", "project"}
	}
	return nil
}

// formatsOf reads a verb's --format choices from its usage text ("table or
// json", "text, json, mermaid or dot").
func formatsOf(c *cli.Command) []string {
	fl := findFlag(c.Flags, "format")
	if fl == nil {
		return nil
	}
	usage := ""
	if u, ok := fl.(interface{ GetUsage() string }); ok {
		usage = u.GetUsage()
	}
	if i := strings.Index(usage, " ("); i >= 0 {
		usage = usage[:i]
	}
	var out []string
	for _, w := range strings.FieldsFunc(usage, func(r rune) bool { return r == ',' || r == ' ' }) {
		if w != "or" && w != "" && !strings.Contains(w, "(") {
			out = append(out, w)
		}
	}
	return out
}

func completionRepo(f *Factory, values map[string]string) *loop.Repo {
	cwd, err := f.Getwd()
	if err != nil && values["repo"] == "" {
		return nil
	}
	root, err := loop.ResolveRoot(values["repo"], cwd)
	if err != nil {
		return nil
	}
	repo, err := loop.OpenRepo(root, "")
	if err != nil {
		return nil
	}
	return repo
}

func completionWorkItems(f *Factory, values map[string]string) []string {
	repo := completionRepo(f, values)
	if repo == nil {
		return nil
	}
	ids, _ := repo.WorkItems()
	return ids
}

// completionGraph is the graph the work item on the line walks (the
// work-item loop when none is named).
func completionGraph(f *Factory, values map[string]string, pos []string) *graph.Graph {
	id := values["work-item"]
	if id == "" && len(pos) > 0 {
		id = pos[0]
	}
	if repo := completionRepo(f, values); repo != nil {
		if rt, err := repo.Runtime(loop.Options{WorkItem: id, Loop: values["loop"]}); err == nil {
			return rt.Graph()
		}
	}
	name := values["loop"]
	if name == "" {
		name = loop.WorkItemLoop
	}
	g, _ := loop.ShippedGraph(name)
	return g
}
