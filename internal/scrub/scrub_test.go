package scrub_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io/fs"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/scrub"
)

func TestScrubsKnownSecretsAndTokenShapes(t *testing.T) {
	s := scrub.New("webhook-secret-1234", "jira@example.com:jira-token-9999", "short")
	for in, want := range map[string]string{
		"sig for webhook-secret-1234 failed": "sig for [redacted] failed",
		"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("jira@example.com:jira-token-9999")): "Authorization: Basic [redacted]",
		"token ghp_" + strings.Repeat("a", 36) + " refused":                                                     "token [redacted] refused",
		"github_pat_11ABCDEFG0123456789_abcdefghijklmnop":                                                       "[redacted]",
		"slack xoxb-1234567890-abcdefghij said no":                                                              "slack [redacted] said no",
		"POST https://hooks.slack.com/services/T000/B000/XXXX: 404":                                             "POST https://[redacted]: 404",
		"key AKIAIOSFODNN7EXAMPLE in env":                                                                       "key [redacted] in env",
		"Authorization: Bearer abc.def-ghi_jkl":                                                                 "Authorization: Bearer [redacted]",
		"a short value is kept: short":                                                                          "a short value is kept: short",
		"nothing here":                                                                                          "nothing here",
	} {
		require.Equal(t, want, s.String(in), in)
	}
	var none *scrub.Scrubber
	require.Equal(t, "x [redacted]", none.String("x xoxp-1234567890-abcdef"), "the nil scrubber applies the patterns")

	err := s.Error(&fs.PathError{Op: "open", Path: "webhook-secret-1234", Err: fs.ErrNotExist})
	require.Equal(t, "open [redacted]: file does not exist", err.Error())
	require.ErrorIs(t, err, fs.ErrNotExist, "the chain is kept")
	require.Nil(t, s.Error(nil))
	plain := errors.New("plain")
	require.Same(t, plain, s.Error(plain))
}

// A secret overlapping the marker cannot be reassembled by replacing it.
func TestScrubNeverGrowsASecretBack(t *testing.T) {
	s := scrub.New("d]d]d]", "[redacted][")
	out := s.String("[redacted][redacted]d]d]d]d]")
	require.NotContains(t, out, "d]d]d]")
	require.NotContains(t, out, "[redacted][")
}

func TestHandlerScrubsMessagesAndAttrs(t *testing.T) {
	var buf bytes.Buffer
	s := scrub.New("the-secret-value")
	l := slog.New(s.Handler(slog.NewJSONHandler(&buf, nil))).With("cfg", "the-secret-value")
	l.Error("call failed with the-secret-value", "err", errors.New("401 the-secret-value"),
		slog.Group("req", "auth", "Bearer the-secret-value", "n", 3), "any", []string{"the-secret-value"})
	out := buf.String()
	require.NotContains(t, out, "the-secret-value")
	require.Contains(t, out, `"n":3`, "non-string values are kept as they are")
	require.Contains(t, out, `"any":["[redacted]"]`, "a list stays a list")
	require.Equal(t, 5, strings.Count(out, scrub.Redacted), out)

	buf.Reset()
	w := s.Writer(&buf)
	_, _ = w.Write([]byte("loopd: the-sec"))
	_, _ = w.Write([]byte("ret-value leaked?\n"))
	require.Equal(t, "loopd: [redacted] leaked?\n", buf.String())
}

func FuzzScrub(f *testing.F) {
	f.Add("secret-value", "x secret-value y")
	f.Add("d]d]d]", "[redacted][redacted]d]d]d]d]")
	f.Add("aaaaaa", "aaaaaaaaaaaa")
	f.Add("[redacted]", "[redacted][redacted]")
	f.Add("ghp_", "Bearer ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	f.Fuzz(func(t *testing.T, secret, text string) {
		s := scrub.New(secret)
		out := s.String(text)
		if v := strings.TrimSpace(secret); len(v) >= scrub.MinSecretLen && strings.Contains(out, v) {
			t.Fatalf("secret %q survives in %q (from %q)", v, out, text)
		}
		if again := s.String(out); again != out {
			t.Fatalf("scrubbing is not idempotent: %q → %q", out, again)
		}
	})
}

// Every log line and event field passes String: a typical event field
// with nothing to scrub, and one with a credential, against five known
// secrets.
func BenchmarkScrub(b *testing.B) {
	s := scrub.New("webhook-secret-value-0123456789", "gh-token-value-0001", "jira-token-value-0002", "slack-bot-token-0003", "service-token-0004")
	for name, text := range map[string]string{
		"clean":  "github.add-comment (api transport): GitHub rejected the request (HTTP 422: Validation Failed) for github:octo/repo#15 at node design-approval",
		"secret": "github.add-comment (api transport): Bad credentials: Bearer gh-token-value-0001 for github:octo/repo#15 at node design-approval",
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				_ = s.String(text)
			}
		})
	}
}
