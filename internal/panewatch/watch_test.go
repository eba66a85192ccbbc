package panewatch

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

type recorder struct {
	frames []string
	idles  int
	fail   error
}

func (r *recorder) Frame(s string) (int, error) {
	r.frames = append(r.frames, s)
	return len(s), r.fail
}

func (r *recorder) Idle() error { r.idles++; return nil }

// screens returns a capture that yields the given screens in turn (the
// last one repeating), then ErrGone when gone is set.
func screens(gone bool, ss ...string) func(context.Context) (string, error) {
	i := 0
	return func(context.Context) (string, error) {
		if i >= len(ss) {
			if gone {
				return "", fmt.Errorf("tmux: %w", ErrGone)
			}
			return ss[len(ss)-1], nil
		}
		i++
		return ss[i-1], nil
	}
}

// Only changed screens are sent, the first at once; a gone pane ends the
// watch with ErrGone; a failing viewer ends it with its error.
func TestWatch(t *testing.T) {
	r := &recorder{}
	err := Watch(context.Background(), Config{Interval: time.Millisecond}, screens(true, "a", "a", "b", "b", "c"), r)
	if !errors.Is(err, ErrGone) {
		t.Fatalf("err = %v, want ErrGone", err)
	}
	if fmt.Sprint(r.frames) != "[a b c]" {
		t.Fatalf("frames = %v, want [a b c]", r.frames)
	}

	boom := errors.New("viewer gone")
	r = &recorder{fail: boom}
	if err := Watch(context.Background(), Config{Interval: time.Millisecond}, screens(false, "x"), r); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the viewer's", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Watch(ctx, Config{}, screens(false, "x"), &recorder{}); err != nil {
		t.Fatalf("a cancelled watch returns nil, got %v", err)
	}
}

// Over its byte budget a viewer gets no frame until the budget refills,
// and then the newest screen — the ones between are folded, not queued.
// The clock is the test's: each capture is 100 ms later.
func TestWatchFoldsFramesOverBudget(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{}
	n := 0
	capture := func(context.Context) (string, error) {
		clock = clock.Add(100 * time.Millisecond)
		n++
		if n > 40 {
			cancel()
		}
		return fmt.Sprintf("%0600d", n), nil // 600 bytes, a new screen each time
	}
	// 1,000 B/s against 600 B frames every 100 ms (6,000 B/s offered).
	_ = Watch(ctx, Config{Interval: time.Millisecond, BytesPerSecond: 1000, Now: now}, capture, r)
	// 4 s of screens: the first second's burst, then one frame per 0.6 s.
	if len(r.frames) < 6 || len(r.frames) > 9 {
		t.Fatalf("%d frames for %d screens over 4 s at 1000 B/s; want 6..9", len(r.frames), n)
	}
	if last := r.frames[len(r.frames)-1]; last < fmt.Sprintf("%0600d", 35) {
		t.Fatalf("the last frame is an old screen: the newest must win")
	}
}
