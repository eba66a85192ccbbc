package sessions

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/theloop-dev/theloop/run"
)

// The runner's commands go through one tmux control-mode client (`tmux -C`)
// kept connected to the server when its Runner can start one
// (run.Starter): a command then costs a line written to a pipe and its
// answer read back, instead of a tmux process started, connected to the
// server and exited for every command — a webhook's paste ran nine of
// those, 2 ms each on an idle machine and 15-60 ms each on a loaded one.
//
// The client attaches to a session of the server with the flags
// no-output (no pane output is sent to it) and ignore-size (it never sizes
// a window), so it neither listens to an agent nor changes what the agent
// sees; every command still names its target explicitly. It never starts a
// server (attach-session does not), so sessions are only ever created by
// Spawn through the confinement. It exits when the session it is attached
// to ends or the server exits; the next command connects again.
//
// Framing. Each request is one line of commands followed by a second line,
// `display-message -p <nonce>`, whose answer — a block holding only the
// random nonce — ends the request: tmux answers every command (and every
// command if-shell runs) with a %begin … %end or %error block, and a
// failing command drops the rest of its own line only, never the next one.
// The only agent-controlled text that crosses the channel is a pane's
// content in capture-pane's answer; a line there forging a block's end
// leaves the real end line outside a block (or a block numbered out of
// order), which the reader refuses: the connection is dropped and the
// request fails without an answer, never with a forged one, since the
// forger cannot produce the nonce.
//
// A request whose connection is lost before its answer may or may not
// have run. Idempotent requests (queries, captures, buffer loads, kills)
// are run again as a tmux process; the others (the paste, the submit key)
// report the loss, as a tmux process killed mid-command would.

// errControlLost: the control connection ended or desynchronised before a
// request's answer.
var errControlLost = errors.New("tmux control client lost")

// errControlNotRun: the connection ended before tmux began any command of
// the request (no %begin of it arrived; the server writes a command's
// %begin before its answer and before the client's %exit, on one stream),
// so none of them ran.
var errControlNotRun = errors.New("tmux control client ended before the request ran")

// controlReconnectDelay is how long the runner uses tmux processes after a
// failed connection attempt (no server yet, or a tmux without control-mode
// client flags) before it tries again.
const controlReconnectDelay = 250 * time.Millisecond

// controlClient owns the one control connection of a Tmux.
type controlClient struct {
	starter run.Starter
	binary  string
	base    []string // -L name / -S path
	// wrap, when set, wraps the client's argv (a world's client box).
	wrap func([]string) []string

	// sem serialises requests (a channel so that waiting honours ctx).
	sem     chan struct{}
	conn    *controlConn // guarded by sem
	retryAt time.Time    // guarded by sem
	closed  bool         // guarded by sem
}

func newControlClient(starter run.Starter, binary string, base []string, wrap func([]string) []string) *controlClient {
	return &controlClient{starter: starter, binary: binary, base: base, wrap: wrap, sem: make(chan struct{}, 1)}
}

// controlConn is one running `tmux -C` client and the goroutine reading it.
type controlConn struct {
	proc   *run.Process
	blocks chan controlBlock
	// done is closed when the reader stopped; err says why.
	done chan struct{}
	err  error
	stop chan struct{}
	once sync.Once
	// begun counts the %begin lines of the client's own commands.
	begun atomic.Uint64
}

// controlBlock is one answer block from the client's own commands.
type controlBlock struct {
	lines  []string
	failed bool
}

// close stops the client process and the reader.
func (c *controlConn) close() {
	c.once.Do(func() {
		close(c.stop)
		c.proc.Stop()
	})
	<-c.done
}

// read parses the client's output into answer blocks until EOF, %exit or a
// line that breaks the framing.
func (c *controlConn) read(r io.Reader) {
	defer close(c.done)
	br := bufio.NewReaderSize(r, 64<<10)
	var cur *controlBlock
	var head string // "<time> <number> <flags>" of the open block
	var last uint64 // number of the last block
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			c.err = fmt.Errorf("%w: %v", errControlLost, err)
			return
		}
		line = strings.TrimSuffix(line, "\n")
		if cur != nil {
			if end, ok := strings.CutPrefix(line, "%end "); ok && end == head {
				if !c.deliver(cur, head) {
					return
				}
				cur = nil
				continue
			}
			if end, ok := strings.CutPrefix(line, "%error "); ok && end == head {
				cur.failed = true
				if !c.deliver(cur, head) {
					return
				}
				cur = nil
				continue
			}
			cur.lines = append(cur.lines, line)
			continue
		}
		switch {
		case strings.HasPrefix(line, "%begin "):
			head = line[len("%begin "):]
			var t, n uint64
			var flags int
			if k, err := fmt.Sscanf(head, "%d %d %d", &t, &n, &flags); err != nil || k != 3 || n <= last && last != 0 {
				c.err = fmt.Errorf("%w: out-of-order or unreadable block %q", errControlLost, line)
				return
			}
			last = n
			cur = &controlBlock{}
			if flags == 1 {
				c.begun.Add(1)
			}
		case line == "%exit" || strings.HasPrefix(line, "%exit "):
			c.err = fmt.Errorf("%w: %s", errControlLost, line)
			return
		case strings.HasPrefix(line, "%end "), strings.HasPrefix(line, "%error "), !strings.HasPrefix(line, "%"):
			c.err = fmt.Errorf("%w: unexpected line outside an answer block", errControlLost)
			return
		default:
			// A notification (%window-add, %sessions-changed, …).
		}
	}
}

// deliver hands a finished block to the request waiting for it; blocks of
// commands the client did not send itself (flags 0: the attach command, a
// hook) are dropped.
func (c *controlConn) deliver(b *controlBlock, head string) bool {
	if !strings.HasSuffix(head, " 1") {
		return true
	}
	select {
	case c.blocks <- *b:
		return true
	case <-c.stop:
		return false
	}
}

// request sends line and the nonce line and collects the answer blocks up
// to the nonce's.
func (c *controlConn) request(ctx context.Context, line string) (blocks [][]string, stderr []string, failed bool, err error) {
	nonce, err := controlNonce()
	if err != nil {
		return nil, nil, false, err
	}
	// An empty line would detach the client: the handshake sends the nonce
	// line alone.
	msg := "display-message -p " + nonce + "\n"
	if line != "" {
		msg = line + "\n" + msg
	}
	begun := c.begun.Load()
	select {
	case <-c.done:
		return nil, nil, false, fmt.Errorf("%w: %w", errControlNotRun, c.err)
	default:
	}
	if _, err := io.WriteString(c.proc.Stdin, msg); err != nil {
		return nil, nil, false, fmt.Errorf("%w: %w: %v", errControlNotRun, errControlLost, err)
	}
	for {
		select {
		case b := <-c.blocks:
			if !b.failed && len(b.lines) == 1 && b.lines[0] == nonce {
				return blocks, stderr, failed, nil
			}
			if b.failed {
				failed = true
				stderr = append(stderr, b.lines...)
			} else {
				blocks = append(blocks, b.lines)
			}
		case <-c.done:
			if failed {
				// tmux drops the rest of a command list after a failing
				// command: the request's line is over, only the nonce's
				// answer is missing (the client exiting after a session
				// ended answers like this).
				return blocks, stderr, failed, nil
			}
			if c.begun.Load() == begun {
				return nil, nil, false, fmt.Errorf("%w: %w", errControlNotRun, c.err)
			}
			return nil, nil, false, c.err
		case <-ctx.Done():
			return nil, nil, false, ctx.Err()
		}
	}
}

func controlNonce() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "theloop-ctl-" + hex.EncodeToString(b[:]), nil
}

// connect starts a client attached to session (or to any session when
// session is "") and waits for its first answer.
func (cc *controlClient) connect(ctx context.Context, session string, timeout time.Duration) (*controlConn, error) {
	args := append(append([]string{}, cc.base...), "-u", "-C", "attach-session")
	if session != "" {
		args = append(args, "-t", sessionTarget(session))
	}
	args = append(args, "-f", "no-output,ignore-size")
	cmd := run.Cmd{Name: cc.binary, Args: args}
	if cc.wrap != nil {
		argv := cc.wrap(append([]string{cc.binary}, args...))
		cmd = run.Cmd{Name: argv[0], Args: argv[1:]}
	}
	proc, err := cc.starter.Start(cmd)
	if err != nil {
		return nil, err
	}
	c := &controlConn{proc: proc, blocks: make(chan controlBlock), done: make(chan struct{}), stop: make(chan struct{})}
	go c.read(proc.Stdout)
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, _, _, err := c.request(hctx, ""); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// do runs cmds as one line through the control connection. A nil error
// is an answer (failed: a command failed, its message in Stderr). An error
// with sent false means nothing reached tmux; with sent true the answer was
// lost or timed out and the commands may or may not have run.
func (cc *controlClient) do(ctx context.Context, timeout time.Duration, session string, cmds [][]string) (res run.Result, blocks [][]string, failed, sent bool, err error) {
	line, err := controlLine(cmds)
	if err != nil {
		return run.Result{}, nil, false, false, err
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	select {
	case cc.sem <- struct{}{}:
	case <-ctx.Done():
		return run.Result{}, nil, false, false, ctx.Err()
	}
	defer func() { <-cc.sem }()
	if cc.closed {
		return run.Result{}, nil, false, false, fmt.Errorf("%w: runner closed", errControlLost)
	}
	if cc.conn == nil {
		if time.Now().Before(cc.retryAt) {
			return run.Result{}, nil, false, false, fmt.Errorf("%w: not connected", errControlLost)
		}
		c, err := cc.connect(ctx, session, timeout)
		if err != nil {
			cc.retryAt = time.Now().Add(controlReconnectDelay)
			return run.Result{}, nil, false, false, err
		}
		cc.conn = c
	}
	blocks, stderr, failed, err := cc.conn.request(ctx, line)
	if err != nil {
		// Lost, timed out or cancelled: answers may still arrive, so the
		// connection cannot serve another request.
		cc.conn.close()
		cc.conn = nil
		// Nothing of it ran: the caller may run it as a process.
		return run.Result{}, nil, false, !errors.Is(err, errControlNotRun), err
	}
	var stdout []string
	for _, b := range blocks {
		stdout = append(stdout, b...)
	}
	res = run.Result{Stdout: joinLines(stdout), Stderr: joinLines(stderr)}
	if failed {
		res.ExitCode = 1
	}
	return res, blocks, failed, true, nil
}

// close ends the connection; later requests are refused (the runner
// then starts a tmux process per command).
func (cc *controlClient) close() {
	cc.sem <- struct{}{}
	defer func() { <-cc.sem }()
	cc.closed = true
	if cc.conn != nil {
		cc.conn.close()
		cc.conn = nil
	}
}

// connected reports whether a connection is up (for tests).
func (cc *controlClient) connected() bool {
	cc.sem <- struct{}{}
	defer func() { <-cc.sem }()
	if cc.conn == nil {
		return false
	}
	select {
	case <-cc.conn.done:
		return false
	default:
		return true
	}
}

func joinLines(ls []string) []byte {
	if len(ls) == 0 {
		return nil
	}
	return []byte(strings.Join(ls, "\n") + "\n")
}

// controlLine renders commands as one line of tmux's command language,
// joined by ";" as the separate arguments of one tmux invocation would be.
// Every argument is double-quoted with everything but a few plain
// characters written as octal escapes, so no byte of an argument is read as
// syntax (quotes, "$" expansion, "~", "#", "{", ";", newlines).
func controlLine(cmds [][]string) (string, error) {
	var b strings.Builder
	for i, c := range cmds {
		if i > 0 {
			b.WriteString(" ; ")
		}
		for j, a := range c {
			// A trailing ";" is plain text inside quotes (tmuxArgSafe's
			// rule is argv's); NUL cannot pass either way.
			if strings.ContainsRune(a, 0) {
				return "", fmt.Errorf("%w: %q contains a NUL byte", ErrUnsafeArgument, a)
			}
			if j > 0 {
				b.WriteByte(' ')
			}
			if j == 0 {
				// The command name itself: plain, validated below.
				for k := 0; k < len(a); k++ {
					if !(a[k] >= 'a' && a[k] <= 'z' || a[k] == '-') {
						return "", fmt.Errorf("%w: tmux command name %q", ErrUnsafeArgument, a)
					}
				}
				b.WriteString(a)
				continue
			}
			writeQuoted(&b, a)
		}
	}
	return b.String(), nil
}

// writeQuoted writes s as a double-quoted tmux string.
func writeQuoted(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == ' ', c == '-', c == '_', c == '.', c == '/', c == ':', c == '=', c == ',', c == '@':
			b.WriteByte(c)
		default:
			b.WriteByte('\\')
			b.WriteByte('0' + c>>6)
			b.WriteByte('0' + c>>3&7)
			b.WriteByte('0' + c&7)
		}
	}
	b.WriteByte('"')
}
