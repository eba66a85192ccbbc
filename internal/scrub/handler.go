package scrub

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"
)

// Handler returns a slog.Handler that scrubs each record's message and
// attribute values (strings, errors, anything printed with %v, in groups
// too) before next sees them.
func (s *Scrubber) Handler(next slog.Handler) slog.Handler {
	return &handler{s: s, next: next}
}

type handler struct {
	s    *Scrubber
	next slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.s.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = h.attr(a)
	}
	return &handler{s: h.s, next: h.next.WithAttrs(clean)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{s: h.s, next: h.next.WithGroup(name)}
}

func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.s.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		clean := make([]any, len(g))
		for i, x := range g {
			clean[i] = h.attr(x)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.s.String(x.Error()))
		case nil:
			return a
		case []string, []any, map[string]any:
			return slog.Any(a.Key, h.s.Value(x))
		default:
			// Any other value keeps its shape when its text holds
			// nothing to scrub, and becomes the scrubbed text otherwise.
			text := v.String()
			if clean := h.s.String(text); clean != text {
				return slog.String(a.Key, clean)
			}
			return slog.Attr{Key: a.Key, Value: v}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// Writer returns a writer that scrubs whole lines before passing them to
// w (a partial line waits for its end; Close-free: a line without its
// newline is written when the next Write completes it).
func (s *Scrubber) Writer(w io.Writer) io.Writer { return &lineWriter{s: s, w: w} }

type lineWriter struct {
	s   *Scrubber
	w   io.Writer
	mu  sync.Mutex
	buf []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	i := bytes.LastIndexByte(l.buf, '\n')
	if i < 0 {
		return len(p), nil
	}
	lines := string(l.buf[:i+1])
	l.buf = append(l.buf[:0], l.buf[i+1:]...)
	if _, err := io.WriteString(l.w, l.s.String(lines)); err != nil {
		return 0, err
	}
	return len(p), nil
}
