package main

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/loop"
)

// trustFlagDefs are the trust-anchor flags of the verbs that honour
// recorded decisions.
func trustFlagDefs() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "trust-key", Usage: "a public key (ed25519:...) whose signed gate decisions count (repeatable; also $" + loop.TrustKeysEnv + ")"},
		&cli.StringFlag{Name: "trust-base", Usage: "a git revision (e.g. origin/main) whose " + loop.TrustedKeysFile + " lists the trusted keys (also $" + loop.TrustBaseEnv + ")"},
	}
}

// trustSource gathers the trust anchor from the flags (when the command
// has them) and the environment. The working tree's trusted-keys file is
// never read: the agent writes the working tree.
func (f *Factory) trustSource(c *cli.Context, repoRoot string) loop.TrustSource {
	src := loop.TrustSource{Env: f.Getenv(loop.TrustKeysEnv), Base: f.Getenv(loop.TrustBaseEnv), Repo: repoRoot}
	if c != nil {
		src.Keys = c.StringSlice("trust-key")
		if b := c.String("trust-base"); b != "" {
			src.Base = b
		}
	}
	return src
}

// withTrustEnv completes flag-given trust sources with the environment.
func (f *Factory) withTrustEnv(src loop.TrustSource, repoRoot string) loop.TrustSource {
	src.Env = f.Getenv(loop.TrustKeysEnv)
	if src.Base == "" {
		src.Base = f.Getenv(loop.TrustBaseEnv)
	}
	src.Repo = repoRoot
	return src
}

// verifier loads the trust anchor; with none it prints the one warning
// line of the run (when warn) and returns nil.
func (f *Factory) verifier(ctx context.Context, src loop.TrustSource, warn bool) (graph.DecisionVerifier, error) {
	v, err := loop.LoadVerifier(ctx, src)
	if err != nil {
		return nil, failWith(exitFailed, "loopctl: the trust anchor cannot be used: %v", err)
	}
	if v == nil {
		if warn {
			fmt.Fprintln(f.IO.ErrOut, "warning:", loop.UnverifiedWarning)
		}
		return nil, nil
	}
	return v, nil
}

type verifyDecisionsOptions struct {
	Factory  *Factory
	Repo     repoFlags
	WorkItem string
	Format   string
	Trust    loop.TrustSource
	Output   output
}

func newVerifyDecisionsCmd(f *Factory) *cli.Command {
	return &cli.Command{
		Name:      "verify-decisions",
		Usage:     "print every recorded gate decision of a work item with its verdict: verified, refused (and why) or unverified",
		ArgsUsage: "WORK-ITEM",
		Description: `A decision counts only when it is signed by a trusted key, over this work item
and gate, and over artifact hashes that still match. Refusals name the reason:
unsigned, a signature that does not verify, a decision replayed from another
work item or gate, an approved artifact changed since (the file is named), or
an untrusted key. Without a trust anchor every decision is "unverified".

Exit status: 0 when no decision is refused, 1 otherwise, 2 for bad usage.

Example:
   loopctl verify-decisions issue-42 --trust-base origin/main`,
		Flags: append(append(repoFlagDefs(true), trustFlagDefs()...), &cli.StringFlag{Name: "format", Value: "table", Usage: "table or json"}, outputFlags()[0], outputFlags()[1]),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return failWith(exitRefused, "loopctl verify-decisions: name one work item, e.g. `loopctl verify-decisions issue-42`")
			}
			opts := &verifyDecisionsOptions{Factory: f, Repo: readRepoFlags(c), WorkItem: c.Args().First(), Format: c.String("format")}
			out, err := readOutput(c, "verify-decisions", &opts.Format)
			if err != nil {
				return err
			}
			opts.Output = out
			root, err := f.repoRoot(opts.Repo)
			if err != nil {
				return err
			}
			opts.Trust = f.trustSource(c, root)
			return runVerifyDecisions(c.Context, opts)
		},
	}
}

func runVerifyDecisions(ctx context.Context, opts *verifyDecisionsOptions) error {
	f := opts.Factory
	if err := loop.ValidateWorkItemID(opts.WorkItem); err != nil {
		return failWith(exitRefused, "loopctl verify-decisions: %v", err)
	}
	v, err := f.verifier(ctx, opts.Trust, true)
	if err != nil {
		return err
	}
	root, err := f.repoRoot(opts.Repo)
	if err != nil {
		return err
	}
	g, err := opts.Repo.graph()
	if err != nil {
		return err
	}
	rt, err := loop.Open(root, loop.Options{Graph: g, WorkItem: opts.WorkItem, PR: opts.Repo.PR, PRRepo: opts.Repo.PRRepo, Clock: f.Clock, DecisionVerifier: v})
	if err != nil {
		return err
	}
	verdicts, err := rt.VerifyDecisions(ctx, opts.WorkItem)
	if err != nil {
		return err
	}
	refused := 0
	for _, d := range verdicts {
		if d.Verdict == graph.DecisionRefused {
			refused++
		}
	}
	if opts.Format == "json" {
		if err := opts.Output.write(f.IO.Out, verdicts); err != nil {
			return err
		}
	} else {
		on := f.colour(f.IO.Out)
		tw := newTable(f.IO.Out, on)
		tw.head("GATE\tOUTCOME\tBY\tAT\tVERDICT\tDETAIL", 4)
		for _, d := range verdicts {
			detail := strings.ReplaceAll(d.Reason, "\n", " ")
			if detail == "" {
				var parts []string
				if d.Key != "" {
					parts = append(parts, "signed by "+d.Key)
				}
				if d.CommentURL != "" {
					parts = append(parts, d.CommentURL)
				} else if d.Comment != "" {
					parts = append(parts, "comment "+d.Comment)
				}
				for _, a := range d.Artifacts {
					parts = append(parts, fmt.Sprintf("%s sha256 %.12s…", a.Name, a.SHA256))
				}
				detail = strings.Join(parts, "; ")
			}
			tw.row("%s\t%s\t%s\t%s\t%s\t%s\n", d.Gate, d.Outcome, d.By, d.At, paint(on, d.Verdict), detail)
		}
		tw.flush()
		fmt.Fprintf(f.IO.Out, "%d decision(s), %d refused\n", len(verdicts), refused)
		writeLocks(f, root, opts, verdicts)
	}
	if refused > 0 {
		return &exitError{code: exitFailed}
	}
	return nil
}

// writeLocks lists the artifacts whose front matter reads `status: approved`
// and the decision each names, with that decision's verdict. A lock is only
// a record: it never passes a gate by itself.
func writeLocks(f *Factory, root string, opts *verifyDecisionsOptions, verdicts []graph.DecisionVerdict) {
	repo, err := loop.OpenRepo(root, "")
	if err != nil {
		return
	}
	dir := filepath.Join(repo.Root, filepath.FromSlash(repo.SpecDir), opts.WorkItem)
	arts := loop.NewFileArtifacts(dir, path.Join(repo.SpecDir, opts.WorkItem))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	byRef := map[string]graph.DecisionVerdict{}
	for _, d := range verdicts {
		byRef[d.Ref] = d
	}
	on := f.colour(f.IO.Out)
	tw := newTable(f.IO.Out, on)
	header := false
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		data, err := arts.ReadFile(e.Name())
		if err != nil {
			continue
		}
		fm, _ := hooks.FrontMatter(string(data))
		if status, _ := fm["status"].(string); strings.TrimSpace(status) != "approved" {
			continue
		}
		if !header {
			tw.head("\nLOCKED ARTIFACT\tNAMES DECISION\tVERDICT", 2)
			header = true
		}
		ref, _ := fm["decision"].(string)
		verdict := "no such decision recorded: the lock alone passes nothing"
		switch d, ok := byRef[ref]; {
		case ref == "":
			ref, verdict = "-", "names no decision: the lock alone passes nothing"
		case ok:
			verdict = d.Verdict
		}
		tw.row("%s\t%s\t%s\n", arts.Path(e.Name()), ref, paint(on, verdict))
	}
	tw.flush()
}
