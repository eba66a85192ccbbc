package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// maxQuestion bounds a question (GitHub refuses comments over 65,536
// characters; the marker needs room).
const maxQuestion = 60000

// askOptions are `loopctl ask`'s flags.
type askOptions struct {
	WorkItem     string
	Question     string
	QuestionFile string
	Config       string
}

// newAskCmd is `loopctl ask` (docs/daemon.md §10): how a session in work-item
// interaction mode asks a human — the question goes to the work item as a
// marked comment, the session ends its turn, and the answer arrives later
// as an ordinary event. It runs in-process; no daemon is needed.
func newAskCmd(f *Factory) *cli.Command {
	return &cli.Command{
		Name:      "ask",
		Usage:     "post a question on the work item (marked as the-loop's) for a human to answer there",
		ArgsUsage: " ",
		Description: `Posts the question as a comment on the work item, marked as the-loop's own, and
records session.awaiting_input in the event log. End your turn afterwards: the
answer arrives as an ordinary event. Exit 0 when posted, 1 when not, 2 for bad
input.

In a session loopd started (THE_LOOP_SESSION_ID, THE_LOOP_WORK_ITEM and
THE_LOOP_STATE_ROOT set) the session holds no credential: the question is
written to the session's outbox and loopd posts it on the work item (exit 0
once it is recorded).

  loopctl ask --work-item github:octo/repo#15 --question 'Which storage backend?'
  loopctl ask --work-item github:octo/repo#15 --question-file - < question.md`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "work-item", Usage: "the work item's ref, github:[host/]owner/repo#N", Required: true},
			&cli.StringFlag{Name: "question", Usage: "the question text"},
			&cli.StringFlag{Name: "question-file", Usage: "read the question from a file (- for standard input)", TakesFile: true},
			&cli.StringFlag{Name: "config", Usage: "the operator's cli-config.yaml", TakesFile: true},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return failWith(exitRefused, "ask takes no arguments (got %q); pass the text with --question", c.Args().First())
			}
			return runAsk(c.Context, f, askOptions{WorkItem: c.String("work-item"), Question: c.String("question"),
				QuestionFile: c.String("question-file"), Config: c.String("config")})
		},
	}
}

func runAsk(ctx context.Context, f *Factory, opts askOptions) error {
	ref, err := workitem.Parse(strings.TrimSpace(opts.WorkItem))
	if err != nil || ref.Provider != "github" {
		return failWith(exitRefused, "--work-item %q: want a GitHub work item ref, github:[host/]owner/repo#N", opts.WorkItem)
	}
	q, err := readQuestion(f, opts)
	if err != nil {
		return failWith(exitRefused, "%v", err)
	}
	root := f.rootHere()
	cfg, err := f.cliConfig(opts.Config, root)
	if err != nil {
		return failWith(exitRefused, "%v", err)
	}
	var sink graph.Sink
	if cfg.EventLogEnabled && cfg.EventLogPath != "" {
		if el, err := loop.OpenEventLog(cfg.EventLogPath, "ask", loop.EventLogOptions{Clock: f.Clock, Warnings: f.IO.ErrOut, Scrub: loop.CredentialScrub(f.lookupEnv)}); err == nil {
			sink = el
			defer el.Close()
		}
	}
	managed, err := loop.ManagedSessionFromEnv(f.Getenv)
	if err != nil {
		return failWith(exitFailed, "loopctl ask: %v", err)
	}
	var integ graph.Integrations
	if managed != nil {
		// No credential here: the question becomes an intent in the
		// session's outbox, and loopd posts it.
		integ = loop.NewAskRecorder(*managed, "ask", f.Clock)
	} else {
		if f.Integrations == nil {
			return failWith(exitFailed, "loopctl ask: no GitHub integration is available")
		}
		i, warns, err := f.Integrations(&cfg, sink)
		if err != nil {
			return failWith(exitFailed, "loopctl ask: %v", err)
		}
		for _, w := range warns {
			fmt.Fprintln(f.IO.ErrOut, "warning:", w)
		}
		integ = i
	}
	res, postErr := integ.Call(ctx, ops.GitHubAddComment, map[string]any{"ref": ref.String(), "body": hooks.Mark(q)})
	url, _ := res["url"].(string)
	intent, _ := res["intent"].(string)
	level := graph.LevelInfo
	if postErr != nil {
		level = graph.LevelWarning
	}
	if sink != nil {
		fields := []graph.Field{
			{Key: "work_item", Value: ref.String()}, {Key: "question", Value: q}, {Key: "actor", Value: f.Getenv("USER")},
			{Key: "comment_url", Value: url}, {Key: "comment_posted", Value: postErr == nil && intent == ""},
		}
		if intent != "" {
			fields = append(fields, graph.Field{Key: "outbox_intent", Value: intent})
		}
		sink.Emit(graph.LogEvent{Time: f.Clock.Now(), Name: "session.awaiting_input", Level: level, Fields: fields})
	}
	if postErr != nil {
		return failWith(exitFailed, "loopctl ask: the question was not posted on %s: %v", ref, postErr)
	}
	if intent != "" {
		fmt.Fprintf(f.IO.Out, "asked on %s — loopd posts it from this session's outbox (intent %s); end your turn; the answer arrives as an event\n", ref, intent)
		return nil
	}
	if url == "" {
		url = ref.String()
	}
	fmt.Fprintf(f.IO.Out, "asked on %s — end your turn; the answer arrives as an event\n", url)
	return nil
}

func readQuestion(f *Factory, opts askOptions) (string, error) {
	var q string
	switch {
	case opts.Question != "" && opts.QuestionFile != "":
		return "", fmt.Errorf("pass --question or --question-file, not both")
	case opts.QuestionFile == "-":
		b, err := io.ReadAll(io.LimitReader(f.IO.In, maxQuestion+1))
		if err != nil {
			return "", fmt.Errorf("--question-file -: %v", err)
		}
		q = string(b)
	case opts.QuestionFile != "":
		fh, err := os.Open(opts.QuestionFile)
		if err != nil {
			return "", fmt.Errorf("--question-file: %v", err)
		}
		defer fh.Close()
		b, err := io.ReadAll(io.LimitReader(fh, maxQuestion+1))
		if err != nil {
			return "", fmt.Errorf("--question-file %s: %v", opts.QuestionFile, err)
		}
		q = string(b)
	default:
		q = opts.Question
	}
	q = strings.TrimSpace(q)
	switch {
	case q == "":
		return "", fmt.Errorf("the question is empty; pass --question TEXT or --question-file PATH")
	case len(q) > maxQuestion:
		return "", fmt.Errorf("the question is over %d bytes; shorten it or link to a file", maxQuestion)
	case !utf8.ValidString(q):
		return "", fmt.Errorf("the question is not valid UTF-8")
	}
	return q, nil
}
