package integrations

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
)

// maxBody bounds how much of an answer is read.
const maxBody = 16 << 20

// Backoff between retries of a 5xx or a failed connection: 500 ms, 1 s,
// 2 s, ... capped at 8 s. No jitter: theloop is one client per operator.
const (
	baseBackoff = 500 * time.Millisecond
	maxBackoff  = 8 * time.Second
)

// Sleeper waits for d or until ctx is done, whichever comes first, and
// returns ctx's error in the latter case. Tests inject one that records the
// waits and returns at once.
type Sleeper func(ctx context.Context, d time.Duration) error

// SleepContext is the real Sleeper.
func SleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// response is one HTTP answer, however it was obtained (net/http, or
// `gh api --include`).
type response struct {
	status int
	header http.Header
	body   []byte
}

// callState accumulates what one Set.Call did, for its error and event.
type callState struct {
	attempts int
	status   int
}

// attemptFunc makes one request. It returns an error only when no answer
// was obtained at all.
type attemptFunc func(ctx context.Context) (response, error)

// retryPolicy drives the attempts of one HTTP exchange.
type retryPolicy struct {
	service     string // "GitHub", "Slack", "Jira"
	maxAttempts int
	clock       graph.Clock
	sleep       Sleeper
	// rateHint completes the rate-limit message with what the operator can do.
	rateHint string
}

// do runs attempt until it yields an answer that is neither a rate limit nor
// (for idempotent requests) a 5xx, or the attempts or the deadline run out.
//
// Retried: 5xx answers and failed connections of idempotent requests, with
// exponential backoff (a 503's Retry-After is honoured); rate limits — 429,
// or 403 with X-RateLimit-Remaining: 0 or Retry-After — of any request,
// because a rate-limited request was not processed, waiting until
// X-RateLimit-Reset or Retry-After. A wait that would not fit before ctx's
// deadline is not started: the call fails at once (ErrRateLimited or
// ErrServer), so an outage costs a hook seconds, never its deadline.
// Non-idempotent requests (posting a comment) are not retried after a 5xx
// or a lost connection, since the service may have acted on them.
//
// Any other answer (2xx, other 4xx) is returned for the caller to interpret.
func (p *retryPolicy) do(ctx context.Context, st *callState, idempotent bool, attempt attemptFunc) (response, error) {
	for n := 1; ; n++ {
		st.attempts++
		resp, err := attempt(ctx)
		var (
			wait time.Duration
			last *failure
		)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return response{}, p.deadline(ctx, st)
			}
			var f *failure
			if errors.As(err, &f) && f.final {
				return response{}, f
			}
			if f == nil {
				f = fail(ErrTransport, "%v", err)
			}
			if !idempotent {
				return response{}, f
			}
			last, wait = f, backoff(n)
		default:
			st.status = resp.status
			if limited, w, until := p.rateLimited(resp); limited {
				last = &failure{kinds: []error{ErrRateLimited}, status: resp.status,
					msg: fmt.Sprintf("%s is rate limiting (HTTP %d)%s — %s", p.service, resp.status, until, p.rateHint)}
				wait = w
				if wait == 0 {
					wait = backoff(n)
				}
			} else if resp.status >= 500 {
				last = &failure{kinds: []error{ErrServer}, status: resp.status,
					msg: fmt.Sprintf("%s answered HTTP %d", p.service, resp.status)}
				if !idempotent {
					last.msg += " (not retried: the request may have been acted on)"
					return resp, last
				}
				wait = backoff(n)
				if ra, ok := retryAfter(resp.header, p.clock.Now()); ok && ra > wait {
					wait = ra
				}
			} else {
				return resp, nil
			}
		}
		if n >= p.maxAttempts {
			last.msg += fmt.Sprintf(" (gave up after %d attempts)", n)
			return resp, last
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			last.msg += fmt.Sprintf(" (gave up after %d attempt(s): the next would start after this call's deadline)", n)
			return resp, last
		}
		if err := p.sleep(ctx, wait); err != nil {
			return response{}, p.deadline(ctx, st)
		}
	}
}

func (p *retryPolicy) deadline(ctx context.Context, st *callState) *failure {
	kinds := []error{ErrTimeout, ctx.Err()}
	if errors.Is(ctx.Err(), context.Canceled) {
		return &failure{kinds: []error{context.Canceled}, status: st.status, msg: fmt.Sprintf("cancelled after %d attempt(s) to reach %s", st.attempts, p.service)}
	}
	return &failure{kinds: kinds, status: st.status, msg: fmt.Sprintf("%s did not answer within the call's deadline (%d attempt(s)) — raise timeoutSeconds if the service is slow", p.service, st.attempts)}
}

// rateLimited reports whether resp is a rate limit and how long to wait
// before the next attempt (0 = use backoff); until describes the reset time.
func (p *retryPolicy) rateLimited(resp response) (limited bool, wait time.Duration, until string) {
	if resp.status != http.StatusTooManyRequests && resp.status != http.StatusForbidden {
		return false, 0, ""
	}
	now := p.clock.Now()
	if ra, ok := retryAfter(resp.header, now); ok {
		return true, ra, fmt.Sprintf(" for %s", ra.Round(time.Second))
	}
	if resp.header.Get("X-RateLimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(strings.TrimSpace(resp.header.Get("X-RateLimit-Reset")), 10, 64); err == nil && reset > 0 && reset < 1<<40 {
			at := time.Unix(reset, 0).UTC()
			w := at.Sub(now)
			if w < 0 {
				w = 0
			}
			// One second of slack: the reset is a whole second.
			return true, w + time.Second, " until " + at.Format(time.RFC3339)
		}
		return true, 0, ""
	}
	if resp.status == http.StatusTooManyRequests {
		return true, 0, ""
	}
	return false, 0, ""
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > 86400 {
			secs = 86400
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		if d < 0 {
			d = 0
		}
		if d > 24*time.Hour {
			d = 24 * time.Hour
		}
		return d, true
	}
	return 0, false
}

func backoff(n int) time.Duration {
	d := baseBackoff
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	if d > maxBackoff {
		d = maxBackoff
	}
	return d
}

// httpAttempt makes one request with client. The error it returns for a
// failed exchange carries the underlying network error but never the URL
// (a Slack webhook URL is itself a credential).
func httpAttempt(client *http.Client, method, target string, header http.Header, body []byte) attemptFunc {
	return func(ctx context.Context) (response, error) {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, target, rd)
		if err != nil {
			return response{}, failFinal(ErrTransport, "building the request failed")
		}
		req.Header = header.Clone()
		resp, err := client.Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return response{}, fail(ErrTransport, "request failed: %v", err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
		if err != nil {
			if ctx.Err() != nil {
				return response{}, ctx.Err()
			}
			return response{}, fail(ErrTransport, "reading the answer failed: %v", err)
		}
		if len(b) > maxBody {
			return response{}, failFinal(ErrTransport, "the answer exceeds %d bytes", maxBody)
		}
		return response{status: resp.StatusCode, header: resp.Header, body: b}, nil
	}
}
