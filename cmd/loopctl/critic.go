package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/sessions"
)

// criticOptions is one `loopctl critic run`.
type criticOptions struct {
	Factory    *Factory
	Repo       repoFlags
	Critic     string
	WorkItem   string
	Node       string
	Prompt     string
	PromptFile string
	DryRun     bool
	// Runner runs the critic (nil: the operating system's).
	Runner run.Runner
}

func newCriticCmd(f *Factory, runF func(context.Context, *criticOptions) error) *cli.Command {
	return &cli.Command{
		Name:  "critic",
		Usage: "a second opinion from another harness or model: list the repository's critics, run one on a work item",
		Description: `Critics are named in .the-loop/harness-config.yaml:

   reviews:
     critics:
       opus:   {harness: claude, model: opus}
       gemini: {harness: gemini, timeoutSeconds: 900}

The critic nodes (design-critic-review, critic-review) want such a review in
execution-log.md: "critic run" makes it — one non-interactive run of the
critic's CLI on the work item's artifacts — and records it there, under the
section the node's exit chain checks.`,
		Subcommands: []*cli.Command{
			{
				Name:        "list",
				Usage:       "the critics this repository configures",
				Description: "Example:\n   loopctl critic list --format json",
				Flags:       append(append(repoFlagDefs(false), &cli.StringFlag{Name: "format", Value: "table", Usage: "table or json"}), outputFlags()...),
				Action: func(c *cli.Context) error {
					if err := noArgs(c, "critic list", ""); err != nil {
						return err
					}
					format := c.String("format")
					o, err := readOutput(c, "critic list", &format)
					if err != nil {
						return err
					}
					return runCriticList(f, readRepoFlags(c), format, o)
				},
			},
			{
				Name:      "run",
				Usage:     "run one critic on a work item and record its review in execution-log.md",
				ArgsUsage: "CRITIC",
				Description: `The critic runs from the repository root with a prompt naming the work item's
artifacts and the node (default: the item's current node); it is told to
change nothing. Its answer is recorded, dated and fenced, in execution-log.md
under the section the node requires (e.g. "Design critic review"). A critic
that is not installed, fails or times out records nothing (exit 1).

Example:
   loopctl critic run opus --work-item issue-42
   loopctl critic run gemini --work-item issue-42 --node critic-review --prompt 'Focus on error handling.'`,
				Flags: append(repoFlagDefs(false),
					&cli.StringFlag{Name: "work-item", Usage: "the work item id (e.g. issue-42)", Required: true},
					&cli.StringFlag{Name: "node", Usage: "the node the review is for (default: the current node)"},
					&cli.StringFlag{Name: "prompt", Usage: "what else to ask the critic"},
					&cli.StringFlag{Name: "prompt-file", Usage: "read what else to ask from a file", TakesFile: true},
					&cli.BoolFlag{Name: "dry-run", Usage: "print the command and the prompt; run nothing"},
				),
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return failWith(exitRefused, "loopctl critic run: name one critic (see `loopctl critic list`)")
					}
					opts := &criticOptions{Factory: f, Repo: readRepoFlags(c), Critic: c.Args().First(), WorkItem: c.String("work-item"),
						Node: c.String("node"), Prompt: c.String("prompt"), PromptFile: c.String("prompt-file"), DryRun: c.Bool("dry-run")}
					if runF != nil {
						return runF(c.Context, opts)
					}
					return runCritic(c.Context, opts)
				},
			},
		},
	}
}

func runCriticList(f *Factory, rf repoFlags, format string, o output) error {
	repo, err := f.openRepo(rf, "", "")
	if err != nil {
		return err
	}
	critics, warns := loop.Critics(repo.Harness)
	for _, w := range warns {
		fmt.Fprintln(f.IO.ErrOut, "warning:", w)
	}
	switch format {
	case "json":
		type view struct {
			Name           string `json:"name"`
			Harness        string `json:"harness"`
			Model          string `json:"model,omitempty"`
			TimeoutSeconds int    `json:"timeoutSeconds"`
		}
		out := make([]view, 0, len(critics))
		for _, c := range critics {
			out = append(out, view{c.Name, c.Harness, c.Model, int(c.Timeout.Seconds())})
		}
		return o.write(f.IO.Out, out)
	case "table", "":
	default:
		return failWith(exitRefused, "--format %q: use table or json", format)
	}
	if len(critics) == 0 {
		fmt.Fprintln(f.IO.Out, "no critics configured; add them to .the-loop/harness-config.yaml:\n\n  reviews:\n    critics:\n      opus: {harness: claude, model: opus}")
		return nil
	}
	tw := newTable(f.IO.Out, f.colour(f.IO.Out))
	tw.head("CRITIC\tHARNESS\tMODEL\tTIMEOUT")
	for _, c := range critics {
		tw.row("%s\t%s\t%s\t%s\n", c.Name, c.Harness, dashIfEmpty(c.Model), c.Timeout)
	}
	return tw.flush()
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// criticHarness is the adapter a critic runs through (one-shot argv), nil
// for a harness that is not registered.
func criticHarness(name string) sessions.Harness {
	if a := sessions.NewAdapter(name, nil); a != nil {
		return a
	}
	return nil
}

func runCritic(ctx context.Context, opts *criticOptions) error {
	f := opts.Factory
	repo, err := f.openRepo(opts.Repo, "", opts.WorkItem)
	if err != nil {
		return err
	}
	critics, warns := loop.Critics(repo.Harness)
	for _, w := range warns {
		fmt.Fprintln(f.IO.ErrOut, "warning:", w)
	}
	var critic *loop.Critic
	var names []string
	for i := range critics {
		names = append(names, critics[i].Name)
		if critics[i].Name == opts.Critic {
			critic = &critics[i]
		}
	}
	if critic == nil {
		if len(names) == 0 {
			return failWith(exitFailed, "loopctl critic run: no critics configured; add reviews.critics to .the-loop/harness-config.yaml (see loopctl critic --help)")
		}
		return failWith(exitFailed, "loopctl critic run: no critic %q; configured: %s", opts.Critic, strings.Join(names, ", "))
	}
	rt, err := f.openCheck(opts.Repo, opts.WorkItem)
	if err != nil {
		return err
	}
	g := rt.Graph()
	nodeID := opts.Node
	if nodeID == "" {
		rep, err := rt.Status(ctx, opts.WorkItem, false)
		if err != nil {
			return err
		}
		nodeID = rep.CurrentNode
	}
	node, ok := g.Node(nodeID)
	if !ok {
		return failWith(exitRefused, "loopctl critic run: --node %q is not a node of %s", nodeID, g.Name)
	}
	extra := opts.Prompt
	if opts.PromptFile != "" {
		b, err := os.ReadFile(opts.PromptFile)
		if err != nil {
			return failWith(exitRefused, "--prompt-file: %v", err)
		}
		extra = strings.TrimSpace(extra + "\n\n" + string(b))
	}
	specDir := path.Join(repo.SpecDir, opts.WorkItem)
	dir := filepath.Join(repo.Root, filepath.FromSlash(specDir))
	arts := loop.CriticArtifacts(repo.Root, specDir)
	prompt := loop.CriticPrompt(node, opts.WorkItem, specDir, arts, extra)
	route := ""
	if critic.Model == "" {
		// A critic that names no model gets its stage's tier's model
		// (tokenEconomy.modelRouting), raised to the item's risk floor.
		routing, warns := loop.LoadModelRouting(repo.Root, repo.Harness)
		for _, w := range warns {
			fmt.Fprintln(f.IO.ErrOut, "warning:", w)
		}
		stage := loop.NodeStage(*node)
		model, tier, why := routing.Model(stage, critic.Harness, repo.RiskTier(opts.WorkItem))
		if model != "" {
			c := *critic
			c.Model, critic = model, &c
			route = fmt.Sprintf("model %s: tier %s of stage %s (tokenEconomy.modelRouting)\n", model, tier, stage)
		} else if routing.Enabled {
			route = "the harness's default model: " + why + "\n"
		}
	}
	h := criticHarness(critic.Harness)
	cmd, err := h.OneShot(prompt, critic.Model)
	if err != nil {
		return failWith(exitRefused, "critic %s: %v", critic.Name, err)
	}
	cmd.Dir, cmd.Timeout = repo.Root, critic.Timeout
	if opts.DryRun {
		fmt.Fprintf(f.IO.Out, "%swould run (in %s): %s\n\nprompt:\n%s", route, repo.Root, cmd, prompt)
		return nil
	}
	runner := opts.Runner
	if runner == nil {
		// The operator's own harness, run by the operator's CLI: it keeps
		// the operator's environment (its model credential among it).
		runner = run.Exec{Environ: run.InheritEnv}
	}
	res, err := runner.Run(ctx, cmd)
	switch {
	case errors.Is(err, run.ErrNotFound):
		return failWith(exitFailed, "critic %s: %s is not installed (its harness is %s); nothing recorded", critic.Name, cmd.Name, critic.Harness)
	case err != nil:
		return failWith(exitFailed, "critic %s: %v; nothing recorded", critic.Name, err)
	case res.ExitCode != 0:
		return failWith(exitFailed, "critic %s: %s exited %d; nothing recorded\n%s", critic.Name, cmd.Name, res.ExitCode, tail(string(res.Stderr), 20))
	}
	review := criticAnswer(res.Stdout)
	section := loop.CriticSection(g, node.ID)
	logPath, err := loop.RecordCriticReview(loop.NewFileArtifacts(dir, specDir).Scrubbed(loop.CredentialScrub(f.lookupEnv)), section, *critic, f.Clock.Now(), review)
	if err != nil {
		return failWith(exitFailed, "critic %s answered but the review could not be recorded: %v", critic.Name, err)
	}
	fmt.Fprintf(f.IO.Out, "recorded critic %s's review in %s under \"## %s\"\n", critic.Name, logPath, section)
	return nil
}

// criticAnswer is the review text in a one-shot CLI's output: the
// "result" (Claude Code, Cursor) or "response" (Gemini CLI) of a JSON
// object, the last agent message of the Codex CLI's JSON lines, else the
// output as it is. At most 64 KiB is kept.
func criticAnswer(out []byte) string {
	const max = 64 << 10
	var obj map[string]any
	if json.Unmarshal(out, &obj) == nil {
		for _, k := range []string{"result", "response", "text"} {
			if s, ok := obj[k].(string); ok {
				return clipText(s, max)
			}
		}
	}
	last := ""
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var ev struct {
			Item struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"item"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Item.Type == "agent_message" && ev.Item.Text != "" {
			last = ev.Item.Text
		}
	}
	if last != "" {
		return clipText(last, max)
	}
	return clipText(string(out), max)
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "\n… (cut)"
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
