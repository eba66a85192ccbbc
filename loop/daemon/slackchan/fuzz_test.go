package slackchan

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/theloop-dev/theloop/workitem"
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

type nopBackend struct{}

func (nopBackend) Authorized(_ context.Context, login string, _ workitem.Ref) string {
	if login == "alice" {
		return ""
	}
	return login + " is not allowed"
}
func (nopBackend) Comment(context.Context, workitem.Ref, string) (string, error) {
	return "", nil
}
func (nopBackend) Reply(context.Context, workitem.Ref, Person, string) error { return nil }
func (nopBackend) Control(context.Context, workitem.Ref, Person, string) (string, error) {
	return "noop", nil
}

// FuzzHandler: a signed body of any shape, as JSON or as a form, is
// answered (never a panic, never a 5xx) and, once its event is handled,
// the channel closes cleanly. Web API calls go to an unroutable address
// and fail, which the channel records.
func FuzzHandler(f *testing.F) {
	f.Add([]byte(`{"type":"event_callback","event_id":"Ev1","event":{"type":"message","user":"UALICE","text":"approved","channel":"C1","ts":"2.0","thread_ts":"1.0"}}`), false)
	f.Add([]byte(`command=%2Fthe-loop&text=pause+octo%2Fapp%2312&user_id=UALICE&trigger_id=t1`), true)
	f.Add([]byte(`command=%2Fthe-loop&text=approve+x&user_id=UALICE&trigger_id=t2`), true)
	f.Add([]byte(`{"type":"url_verification","challenge":"c"}`), false)
	f.Fuzz(func(t *testing.T, body []byte, form bool) {
		secret := []byte("s")
		now := time.Unix(1_800_000_000, 0)
		ch, err := New(Config{Mode: ModeEvents, Channel: "C1", BotToken: "xoxb-x", SigningSecret: secret, StateDir: t.TempDir(),
			Users: map[string]string{"UALICE": "alice"}, APIURL: "http://127.0.0.1:1/api/"},
			Deps{Backend: nopBackend{}, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		ch.st.data.Threads["github:octo/app#12"] = Thread{Channel: "C1", TS: "1.0"}
		ts := strconv.FormatInt(now.Unix(), 10)
		r := httptest.NewRequest(http.MethodPost, "/slack/events", bytes.NewReader(body))
		if form {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		r.Header.Set("X-Slack-Request-Timestamp", ts)
		r.Header.Set("X-Slack-Signature", SignatureHeader(secret, ts, body))
		rr := httptest.NewRecorder()
		ch.Handler().ServeHTTP(rr, r)
		if rr.Code >= 500 {
			t.Fatalf("answered %d: %s", rr.Code, rr.Body)
		}
		_ = ch.Close()
	})
}
