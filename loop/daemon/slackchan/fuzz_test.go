package slackchan

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseEnvelope: any body parses or errors, never panics; a message it
// returns came from an event_callback with a printable event id.
func FuzzParseEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"type":"url_verification","challenge":"abc"}`,
		`{"type":"event_callback","event_id":"Ev1","event":{"type":"message","user":"U1","text":"hi","channel":"C1","ts":"2.0","thread_ts":"1.0"}}`,
		`{"type":"event_callback","event_id":"Ev2","event":{"type":"message","subtype":"message_changed","message":{"text":"x"}}}`,
		`{"type":"event_callback","event_id":"Ev3","event":{"type":"app_mention"}}`,
		`{"type":"app_rate_limited","minute_rate_limited":1}`,
		`{"type":"event_callback","event_id":"Ev4","event":[]}`,
		`{"type":"event_callback","event_id":"Ev\u00005","event":{"type":"message"}}`,
		`null`, `[]`, `{"type":7}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := parseEnvelope(body)
		if err != nil {
			return
		}
		if e.Message != nil && (e.Type != typeEventCallback || !printableID(e.EventID)) {
			t.Fatalf("a message from %q with event id %q", e.Type, e.EventID)
		}
		_ = e.Message.threadReply()
	})
}

// FuzzVerify: only the body signed with the secret at an in-window time
// passes; any header values never panic.
func FuzzVerify(f *testing.F) {
	secret := []byte("s3cr3t")
	now := time.Unix(1_800_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	f.Add([]byte(`{"a":1}`), SignatureHeader(secret, ts, []byte(`{"a":1}`)), ts)
	f.Add([]byte(`x`), "v0=zz", "12")
	f.Add([]byte(``), "", "")
	f.Add([]byte(`x`), "v0="+string(make([]byte, 64)), "-1")
	f.Fuzz(func(t *testing.T, body []byte, sig, stamp string) {
		h := http.Header{}
		h.Set("X-Slack-Signature", sig)
		h.Set("X-Slack-Request-Timestamp", stamp)
		err := Verify(h, body, secret, now)
		if err == nil && !strings.EqualFold(sig, SignatureHeader(secret, stamp, body)) {
			t.Fatalf("accepted a signature that is not the body's: %q", sig)
		}
	})
}
