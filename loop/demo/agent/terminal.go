package agent

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"unicode/utf8"
)

// Terminal input the way an interactive agent CLI reads it, so that
// theloop's tmux delivery (sessions.Tmux.Deliver) works on the scripted
// agent exactly as on Claude Code: the program turns on bracketed paste,
// echoes what is pasted (the receipt Deliver waits for), and treats Enter
// outside a paste as "submit".

// pastePrefix marks each echoed line of a paste, so whoever attaches can
// tell theloop's pastes from the agent's own output.
const pastePrefix = "│ "

const (
	bracketedPasteOn  = "\x1b[?2004h"
	bracketedPasteOff = "\x1b[?2004l"
	// maxMessage bounds one message; the rest of an oversized paste is
	// dropped (and said so).
	maxMessage = 1 << 20
)

// Reader splits terminal input into submitted messages. It is a state
// machine over bytes, fed in chunks of any size: escape sequences may span
// chunks. It never panics on any input (FuzzReader).
type Reader struct {
	// Echo receives what a terminal user should see of the input.
	Echo io.Writer

	buf     bytes.Buffer
	state   int // 0 text, 1 after ESC, 2 in CSI
	csi     []byte
	inPaste bool
	dropped bool
	// afterPaste: the paste's end was echoed with a newline and nothing was
	// typed since, so the submitting Enter echoes nothing more.
	afterPaste bool
}

const (
	stText = iota
	stEsc
	stCSI
)

// Feed consumes input and returns the messages submitted in it.
func (r *Reader) Feed(p []byte) []string {
	var out []string
	var echo bytes.Buffer
	for _, c := range p {
		switch r.state {
		case stEsc:
			if c == '[' {
				r.state, r.csi = stCSI, r.csi[:0]
			} else {
				r.state = stText // a lone ESC or an Alt-key: ignored
			}
			continue
		case stCSI:
			if c >= 0x40 && c <= 0x7e {
				switch string(r.csi) + string(c) {
				case "200~":
					if !r.inPaste {
						echo.WriteString(pastePrefix)
					}
					r.inPaste, r.afterPaste = true, false
				case "201~":
					if r.inPaste {
						echo.WriteString("\n")
						r.afterPaste = true
					}
					r.inPaste = false
				}
				r.state = stText
			} else if len(r.csi) < 16 {
				r.csi = append(r.csi, c)
			} else {
				r.state = stText
			}
			continue
		}
		switch {
		case c == 0x1b:
			r.state = stEsc
		case c == '\r' || c == '\n':
			if r.inPaste {
				r.add('\n')
				echo.WriteString("\n" + pastePrefix)
				continue
			}
			if !r.afterPaste {
				echo.WriteString("\n")
			}
			r.afterPaste = false
			if msg := strings.TrimSpace(r.buf.String()); msg != "" {
				out = append(out, msg)
			}
			r.buf.Reset()
			r.dropped = false
		case c == 0x7f || c == 0x08:
			if !r.inPaste {
				r.afterPaste = false
				b := r.buf.Bytes()
				if _, n := utf8.DecodeLastRune(b); n > 0 {
					r.buf.Truncate(len(b) - n)
					echo.WriteString("\b \b")
				}
			}
		case c == '\t' || c >= 0x20:
			r.add(c)
			echo.WriteByte(c)
			if !r.inPaste {
				r.afterPaste = false
			}
		}
	}
	if r.Echo != nil && echo.Len() > 0 {
		_, _ = r.Echo.Write(echo.Bytes())
	}
	return out
}

func (r *Reader) add(c byte) {
	if r.buf.Len() >= maxMessage {
		r.dropped = true
		return
	}
	r.buf.WriteByte(c)
}

// SyncWriter serialises writes from the echo and from the agent's
// narration, which run on different goroutines.
type SyncWriter struct {
	mu sync.Mutex
	W  io.Writer
}

// Write implements io.Writer.
func (s *SyncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.W.Write(p)
}

// Serve reads in until it ends or ctx is done, echoing to out, and sends
// every submitted message to msgs (dropping none: the channel is drained
// by the caller). It closes msgs when it returns.
func Serve(ctx context.Context, in io.Reader, out io.Writer, msgs chan<- string) error {
	defer close(msgs)
	r := &Reader{Echo: out}
	buf := make([]byte, 4096)
	for {
		n, err := in.Read(buf)
		for _, m := range r.Feed(buf[:n]) {
			select {
			case msgs <- m:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
