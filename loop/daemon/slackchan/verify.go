package slackchan

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxSkew is how far a request's X-Slack-Request-Timestamp may be from
// loopd's clock: Slack's own bound, which limits a replay of a captured
// request to that window (the event-id ledger catches a replay inside it).
const MaxSkew = 5 * time.Minute

// Errors of request verification, all answered 401.
var (
	// ErrNoSigningSecret: no signing secret is configured; the Events API
	// endpoint is not served (fail closed).
	ErrNoSigningSecret = errors.New("no Slack signing secret")
	// ErrMissingSignature: X-Slack-Signature or X-Slack-Request-Timestamp
	// is absent.
	ErrMissingSignature = errors.New("missing X-Slack-Signature or X-Slack-Request-Timestamp")
	// ErrBadSignature: the signature is malformed or does not match.
	ErrBadSignature = errors.New("bad Slack request signature")
	// ErrStale: the timestamp is outside MaxSkew of loopd's clock.
	ErrStale = errors.New("request timestamp outside Slack's 5-minute window")
)

// Verify checks a request's v0 signature: HMAC-SHA256 over
// "v0:<timestamp>:<body>" keyed by the signing secret, hex-encoded after
// "v0=", compared in constant time; and that the timestamp is within
// MaxSkew of now. It is the only gate in front of the Events API and fails
// closed on anything it cannot read.
func Verify(h http.Header, body []byte, secret []byte, now time.Time) error {
	if err := precheck(h, secret, now); err != nil {
		return err
	}
	ts := h.Get("X-Slack-Request-Timestamp")
	hexSig, ok := strings.CutPrefix(h.Get("X-Slack-Signature"), "v0=")
	if !ok {
		return fmt.Errorf("%w: not a v0 signature", ErrBadSignature)
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: not a hex SHA-256", ErrBadSignature)
	}
	if !hmac.Equal(got, Sign(secret, ts, body)) {
		return ErrBadSignature
	}
	return nil
}

// precheck is what Verify checks before the body: a secret, both headers,
// a timestamp within MaxSkew.
func precheck(h http.Header, secret []byte, now time.Time) error {
	if len(secret) == 0 {
		return ErrNoSigningSecret
	}
	sig, ts := h.Get("X-Slack-Signature"), h.Get("X-Slack-Request-Timestamp")
	if sig == "" || ts == "" {
		return ErrMissingSignature
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || secs <= 0 {
		return fmt.Errorf("%w: timestamp %q is not a Unix time", ErrStale, clip(ts, 20))
	}
	if d := now.Sub(time.Unix(secs, 0)); d > MaxSkew || d < -MaxSkew {
		return ErrStale
	}
	return nil
}

// Sign is the raw v0 signature of body at timestamp ts (what Slack sends
// hex-encoded after "v0="). Tests sign their requests with it.
func Sign(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return m.Sum(nil)
}

// SignatureHeader is "v0=" + hex(Sign(...)).
func SignatureHeader(secret []byte, ts string, body []byte) string {
	return "v0=" + hex.EncodeToString(Sign(secret, ts, body))
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
