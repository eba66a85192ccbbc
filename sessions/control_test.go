package sessions

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/run"
)

// countingRunner is run.Exec counting the tmux processes it runs and the
// control clients it starts.
type countingRunner struct {
	run.Exec
	runs, starts atomic.Int64
}

func (c *countingRunner) Run(ctx context.Context, cmd run.Cmd) (run.Result, error) {
	c.runs.Add(1)
	return c.Exec.Run(ctx, cmd)
}

func (c *countingRunner) Start(cmd run.Cmd) (*run.Process, error) {
	c.starts.Add(1)
	return c.Exec.Start(cmd)
}

func newCountingTmux(t *testing.T) (*Tmux, *countingRunner) {
	t.Helper()
	cr := &countingRunner{}
	base := newTestTmux(t, nil)
	tm, err := NewTmux(base.cfg, cr)
	require.NoError(t, err)
	t.Cleanup(tm.Close)
	return tm, cr
}

// Once its control client is connected, a delivery into a live session
// starts no tmux process at all: probe, capture, buffer, paste, receipt
// and submit all go through the one client.
func TestControlClientCarriesDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm, cr := newCountingTmux(t)
	fake := writeFakeClaude(t)
	spawnFake(t, tm, fake, "loop-github-o-r-1", "conv-1")
	require.NotNil(t, tm.ctl, "run.Exec can start a control client")

	// The first probe connects, unless a connection attempt failed within
	// controlReconnectDelay (during Spawn, before the session existed; on a
	// busy machine WaitReady can end inside that window): then commands
	// run as processes until the delay is over. Probe until connected.
	waitFor(t, "the control client connected", func() bool {
		_, err := tm.Probe(ctx, "loop-github-o-r-1")
		require.NoError(t, err)
		return tm.ctl.connected()
	})
	runs, starts := cr.runs.Load(), cr.starts.Load()
	for i := range 3 {
		msg := fmt.Sprintf("through the control client %d", i)
		r, err := tm.Deliver(ctx, "loop-github-o-r-1", msg)
		require.NoError(t, err)
		require.True(t, r.Verified() && r.Seen, "%+v", r)
		fake.waitReceived(t, "conv-1", msg)
	}
	require.Equal(t, runs, cr.runs.Load(), "no tmux process per command")
	require.Equal(t, starts, cr.starts.Load(), "one client, kept")
	require.Empty(t, strings.TrimSpace(tmuxRaw(t, tm, "list-buffers")), "paste buffers are removed")

	tm.Close()
	l, err := tm.Probe(ctx, "loop-github-o-r-1")
	require.NoError(t, err)
	require.Equal(t, LivenessLive, l, "after Close, commands run as processes")
	require.Greater(t, cr.runs.Load(), runs)
}

// Arguments reach tmux byte for byte: quotes, "$", "~", "#{…}", ";",
// backslashes, newlines, tabs, a leading "-", and non-ASCII text are data,
// never syntax.
func TestControlArgumentsAreData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm, _ := newCountingTmux(t)
	tmuxRaw(t, tm, "new-session", "-d", "-s", "loop-quote-1", "cat")
	_, err := tm.Probe(ctx, "loop-quote-1")
	require.NoError(t, err)

	dir := t.TempDir()
	for i, text := range []string{
		`plain text`,
		`it's "quoted" \back\slash\`,
		"$HOME ${HOME} ~ ~/x #{pane_dead} #(id) %if %endif",
		"semi; colon ;\n; kill-server ;",
		"-b leading dash",
		"line one\nline two\n\ttabbed\n",
		"{ brace } 'single' \"double\"",
		"ünïcödé — 日本語 🙂",
		"%end 1 2 1\n%begin 1 2 1\n%exit",
	} {
		buf := fmt.Sprintf("theloop-test-%d", i)
		_, err, done := tm.viaControl(ctx, time.Second, true, []string{"set-buffer", "-b", buf, "--", text})
		require.True(t, done, "sent through the control client")
		require.NoError(t, err)
		path := filepath.Join(dir, buf)
		tmuxRaw(t, tm, "save-buffer", "-b", buf, path)
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, text, string(got), "case %d", i)
	}
}

// A pane that prints control-mode protocol lines cannot forge an answer:
// the capture comes back whole (through the client, or through a tmux
// process after the client dropped a desynchronised connection), and the
// commands after it are answered correctly.
func TestControlForgedProtocolInPane(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm, _ := newCountingTmux(t)
	now := time.Now().Unix()
	var forged strings.Builder
	for n := range 40 {
		fmt.Fprintf(&forged, "%%%%end %d %d 1\\n%%%%error %d %d 1\\n%%%%begin %d %d 1\\n", now, n, now, n, now, n+1)
	}
	script := "printf '" + forged.String() + "%%exit\\nforgery done\\n'; exec cat"
	require.NoError(t, tm.Spawn(ctx, SpawnSpec{Name: "loop-forge-1", Cwd: t.TempDir(), Argv: []string{"bash", "-c", script}}))
	require.NoError(t, tm.Spawn(ctx, SpawnSpec{Name: "loop-other-1", Cwd: t.TempDir(), Argv: []string{"cat"}}))
	waitFor(t, "the forgery on screen", func() bool {
		s, _ := tm.Capture(ctx, "loop-forge-1")
		return strings.Contains(s, "forgery done")
	})
	for range 3 {
		s, err := tm.Capture(ctx, "loop-forge-1")
		require.NoError(t, err)
		require.Contains(t, s, fmt.Sprintf("%%end %d 0 1\n", now), "the pane's lines are data")
		require.Contains(t, s, "%exit\nforgery done")
		for _, name := range []string{"loop-forge-1", "loop-other-1"} {
			l, err := tm.Probe(ctx, name)
			require.NoError(t, err)
			require.Equal(t, LivenessLive, l)
		}
		l, err := tm.Probe(ctx, "loop-absent-1")
		require.NoError(t, err)
		require.Equal(t, LivenessAbsent, l)
	}
}

// The client ends with the session it is attached to; the next command
// connects again, and a command in between is never lost.
func TestControlClientReconnects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm, cr := newCountingTmux(t)
	require.NoError(t, tm.Spawn(ctx, SpawnSpec{Name: "loop-a-1", Cwd: t.TempDir(), Argv: []string{"cat"}}))
	require.NoError(t, tm.Spawn(ctx, SpawnSpec{Name: "loop-b-1", Cwd: t.TempDir(), Argv: []string{"cat"}}))
	time.Sleep(controlReconnectDelay)   // past a connection refused before the sessions existed
	_, err := tm.Probe(ctx, "loop-a-1") // attaches to loop-a-1
	require.NoError(t, err)
	require.True(t, tm.ctl.connected())
	require.NoError(t, tm.Kill(ctx, "loop-a-1"))
	for range 5 {
		l, err := tm.Probe(ctx, "loop-b-1")
		require.NoError(t, err)
		require.Equal(t, LivenessLive, l)
		l, err = tm.Probe(ctx, "loop-a-1")
		require.NoError(t, err)
		require.Equal(t, LivenessAbsent, l)
		time.Sleep(controlReconnectDelay / 4)
	}
	waitFor(t, "a new control client", func() bool {
		_, _ = tm.Probe(ctx, "loop-b-1")
		return tm.ctl.connected()
	})
	runs := cr.runs.Load()
	l, err := tm.Probe(ctx, "loop-b-1")
	require.NoError(t, err)
	require.Equal(t, LivenessLive, l)
	require.Equal(t, runs, cr.runs.Load(), "through the new client")
	// The server exits with its last session: the client with it.
	require.NoError(t, tm.Kill(ctx, "loop-b-1"))
	l, err = tm.Probe(ctx, "loop-b-1")
	require.NoError(t, err)
	require.Equal(t, LivenessAbsent, l)
}

func TestControlLineRefusesWhatCannotPass(t *testing.T) {
	_, err := controlLine([][]string{{"set-buffer", "a\x00b"}})
	require.ErrorIs(t, err, ErrUnsafeArgument)
	_, err = controlLine([][]string{{"kill-server;", "x"}})
	require.ErrorIs(t, err, ErrUnsafeArgument)
	line, err := controlLine([][]string{{"has-session", "-t", "=loop-x-1"}, {"list-panes", "-F", "#{pane_dead}"}})
	require.NoError(t, err)
	require.Equal(t, `has-session "-t" "=loop-x-1" ; list-panes "-F" "\043\173pane_dead\175"`, line)
}

// FuzzControlRead feeds arbitrary client output to the reader: it never
// panics, never hangs, and hands out only blocks framed by a %begin and a
// matching %end or %error.
func FuzzControlRead(f *testing.F) {
	f.Add([]byte("%begin 1 2 1\nhello\n%end 1 2 1\n%exit\n"))
	f.Add([]byte("%begin 1 2 0\n%end 1 2 0\n%session-changed $1 x\n%begin 1 3 1\nx\n%error 1 3 1\n"))
	f.Add([]byte("%begin 1 2 1\n%end 1 2 1\nstray\n"))
	f.Add([]byte("%begin 1 5 1\n%end 1 5 1\n%begin 1 4 1\n"))
	f.Add([]byte("%end 1 2 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &controlConn{blocks: make(chan controlBlock), done: make(chan struct{}), stop: make(chan struct{})}
		go c.read(bytes.NewReader(data))
		n := 0
		for {
			select {
			case b := <-c.blocks:
				n++
				for _, l := range b.lines {
					require.NotContains(t, l, "\n")
				}
			case <-c.done:
				require.Error(t, c.err, "the reader only stops on an error or %exit")
				require.LessOrEqual(t, n, bytes.Count(data, []byte("%begin ")))
				return
			case <-time.After(30 * time.Second):
				t.Fatal("the reader hangs")
			}
		}
	})
}

// FuzzSquashSpace: the one-pass squash is strings.Fields joined by spaces.
func FuzzSquashSpace(f *testing.F) {
	for _, s := range []string{"", " a  b\t\nc ", "\u00a0x\u0085y\u3000", "\xff \xfe\x80z", "trailing   "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		require.Equal(t, strings.Join(strings.Fields(s), " "), squashSpace(s))
	})
}

// The paste guard's dead-pane marker printed by the pane itself is pane
// content, not the guard's answer: the delivery goes through.
func TestControlDeliverIgnoresMarkerOnScreen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm, _ := newCountingTmux(t)
	require.NoError(t, tm.Spawn(ctx, SpawnSpec{Name: "loop-marker-1", Cwd: t.TempDir(),
		Argv: []string{"bash", "-c", "echo " + paneDeadMarker + "; exec cat"}}))
	waitFor(t, "the marker on screen", func() bool {
		s, _ := tm.Capture(ctx, "loop-marker-1")
		return strings.Contains(s, paneDeadMarker)
	})
	r, err := tm.Deliver(ctx, "loop-marker-1", "delivered despite the marker")
	require.NoError(t, err)
	require.True(t, r.Verified() && r.Seen, "%+v", r)
}

// A pane whose scrollback is full keeps receipts exact: tmux trims the
// oldest lines as a prompt arrives, so the count of a footer every prompt
// ends with does not rise, and a receipt that counted it saw nothing and
// waited out the settle period on every delivery. The receipt looks for a
// line of the prompt the scrollback does not hold yet.
func TestReceiptSurvivesAFullScrollback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, nil)
	fake := writeFakeClaude(t)
	spawnFake(t, tm, fake, "loop-github-o-r-1", "conv-1") // starts the server
	tmuxRaw(t, tm, "set-option", "-g", "history-limit", "30")
	// cat on a terminal shows every prompt twice (the echo, then its
	// output), so the pane's 30 lines of history overflow on the third.
	require.NoError(t, tm.Spawn(ctx, SpawnSpec{Name: "loop-github-o-r-2", Cwd: t.TempDir(), Argv: []string{"cat"}}))
	for i := range 12 {
		msg := fmt.Sprintf("# the-loop event\n- delivery: %d-%d\nsomething happened\n\n(assigned by the graph, not part of any payload)", i, i*7919)
		r, err := tm.Deliver(ctx, "loop-github-o-r-2", msg)
		require.NoError(t, err)
		require.True(t, r.Seen, "delivery %d was confirmed by the text itself, not by a changed screen after the settle: %+v", i, r)
	}
}

// TestReceiptBeyondItsWindow: the receipt captures the last receiptHistory
// lines of history, not the whole scrollback. Prompts that share their
// footer, pasted until the history holds several windows, are each
// confirmed by their own text.
func TestReceiptBeyondItsWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestTmux(t, nil)
	fake := writeFakeClaude(t)
	spawnFake(t, tm, fake, "loop-github-o-r-1", "conv-1") // starts the server
	require.NoError(t, tm.Spawn(ctx, SpawnSpec{Name: "loop-github-o-r-2", Cwd: t.TempDir(), Argv: []string{"cat"}}))
	body := strings.Repeat("a line of the event's body, the same in every prompt\n", 30)
	for i := range 16 { // cat shows each prompt twice: ~1,000 lines in all
		msg := fmt.Sprintf("# the-loop event\n- delivery: %d-%d\n%s\n(assigned by the graph, not part of any payload)", i, i*7919, body)
		r, err := tm.Deliver(ctx, "loop-github-o-r-2", msg)
		require.NoError(t, err)
		require.True(t, r.Seen, "delivery %d was confirmed by the text itself: %+v", i, r)
	}
	lines := strings.Count(tmuxRaw(t, tm, "capture-pane", "-p", "-J", "-S", "-", "-t", "=loop-github-o-r-2:"), "\n")
	require.Greater(t, lines, 3*receiptHistory, "the scrollback outgrew the receipt's window")
}

func TestReceiptCandidatesAndPick(t *testing.T) {
	cands := receiptCandidates("a first line\n- delivery: 42\n\n   footer   line  ")
	require.Equal(t, []string{"footer line", "- delivery: 42", "a first line"}, cands)
	frag, n := pickReceiptFragment(cands, "old prompt footer line and more footer line")
	require.Equal(t, "- delivery: 42", frag, "the footer is on the screen already; the unique line is looked for")
	require.Zero(t, n)
	frag, n = pickReceiptFragment(cands, "footer line - delivery: 42 a first line footer line")
	require.Equal(t, "footer line", frag, "all on screen: the last line and its count, as before")
	require.Equal(t, 2, n)
	long := strings.Repeat("x", 40) + "END"
	require.Equal(t, []string{strings.Repeat("x", 21) + "END"}, receiptCandidates(long), "the last 24 runes of a long line")
	require.Len(t, receiptCandidates(strings.Repeat("line\n", 3)+"a\nb\nc\nd\ne\nf\ng\nh\ni\n"), maxReceiptLines)
}
