// Package panewatch turns a terminal pane that can only be polled (tmux
// capture-pane) into a stream of changed frames for one viewer: the live
// view of an agent's session on the dashboard and the control plane's
// GET /sessions/{ref}/pane.
//
// Polling, not tmux pipe-pane: pipe-pane hands over the raw byte stream,
// which a viewer can only show by emulating a terminal (cursor moves,
// alternate screen, scrolling regions — what the agents' TUIs use), and
// one pane has one pipe, so a second viewer would need a fan-out process.
// A capture is the screen tmux has already emulated, ~1 ms of tmux work,
// and costs nothing while nobody watches: a Watch runs only while its
// viewer is connected. The interval bounds latency (a change is seen at
// most Interval later); the byte budget bounds a viewer's bandwidth: a
// frame that would exceed it waits, and the frames that change meanwhile
// are folded into the next one (a viewer always ends on the newest
// screen, it never sees a backlog).
package panewatch

import (
	"context"
	"errors"
	"time"
)

// Defaults of Config.
const (
	// DefaultInterval is how often a watched pane is captured.
	DefaultInterval = 100 * time.Millisecond
	// DefaultBytesPerSecond caps one viewer's frames.
	DefaultBytesPerSecond = 64 << 10
)

// Config tunes a Watch.
type Config struct {
	// Interval between captures (default DefaultInterval; at least 20 ms).
	Interval time.Duration
	// BytesPerSecond is the viewer's budget (default
	// DefaultBytesPerSecond); a burst of one second's budget is allowed.
	BytesPerSecond int
	// KeepAlive, when set, calls Idle after that long without a frame (an
	// SSE comment keeps proxies from closing the stream).
	KeepAlive time.Duration
	// Now is the budget's and keep-alive's clock (default time.Now).
	Now func() time.Time
}

// Viewer receives the frames.
type Viewer interface {
	// Frame sends a changed screen (encoded by the caller); its size in
	// bytes is charged to the budget. An error ends the Watch.
	Frame(screen string) (sent int, err error)
	// Idle is called every KeepAlive without a frame.
	Idle() error
}

// ErrGone is returned by a capture when the pane no longer exists: the
// Watch sends nothing more and returns it.
var ErrGone = errors.New("the pane is gone")

// Watch captures the pane every Interval until ctx ends, the viewer fails
// or capture returns an error wrapping ErrGone, sending each screen that
// differs from the last one sent. The first capture is sent at once. A
// capture error other than ErrGone is retried at the next tick (tmux may
// be busy). It returns nil when ctx ends.
func Watch(ctx context.Context, cfg Config, capture func(context.Context) (string, error), v Viewer) error {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	cfg.Interval = max(cfg.Interval, 20*time.Millisecond)
	if cfg.BytesPerSecond <= 0 {
		cfg.BytesPerSecond = DefaultBytesPerSecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	budget := float64(cfg.BytesPerSecond) // token bucket, one second of burst
	last := cfg.Now()
	lastFrame := last
	sentScreen, first := "", true
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	for {
		screen, err := capture(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrGone):
			return err
		case err == nil && (first || screen != sentScreen):
			now := cfg.Now()
			budget = min(float64(cfg.BytesPerSecond), budget+now.Sub(last).Seconds()*float64(cfg.BytesPerSecond))
			last = now
			if budget > 0 || first {
				n, err := v.Frame(screen)
				if err != nil {
					return err
				}
				budget -= float64(n)
				sentScreen, first, lastFrame = screen, false, now
			}
			// else: over budget — the newer screen goes out once the
			// budget refills (folded, never queued).
		}
		if cfg.KeepAlive > 0 && cfg.Now().Sub(lastFrame) >= cfg.KeepAlive {
			if err := v.Idle(); err != nil {
				return err
			}
			lastFrame = cfg.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
