package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/theloop-dev/theloop/workitem"
)

// seedPayloads adds every example payload (when the shared fixtures are
// present) and a few hostile shapes.
func seedPayloads(f *testing.F, add func(b []byte)) {
	files, _ := filepath.Glob(filepath.Join(fixtureDir, "*", "*.json"))
	for i, p := range files {
		if i%4 != 0 {
			continue // a quarter keeps the corpus quick to replay
		}
		if b, err := os.ReadFile(p); err == nil {
			add(b)
		}
	}
	for _, s := range []string{
		`{}`, `[]`, `{"action":"created","repository":{"full_name":"octo/repo"},"issue":{"number":1},"comment":{"id":1,"body":"the-loop start","user":{"login":"alice"}},"sender":{"login":"alice"}}`,
		`{"a":"\u0000\ud800x","b":-0.5e+7,"c":[true,false,null]}`, `{"action":1e999}`, `"x"`, `{"a":}`, `{"a" "b"}`,
		`{"repository":{"full_name":"octo/repo","full_name":"evil/x"},"issue":{"number":2}}`,
		`{"action":"completed","repository":{"full_name":"octo/repo"},"check_run":{"head_branch":"issue-3","pull_requests":[{"number":9,"head":{"ref":"issue-4"}},7],"check_suite":{"pull_requests":[{"number":9}],"head_branch":"issue-5"}}}`,
		`{"\u0061ction":"created"}`, strings.Repeat("[", 400) + strings.Repeat("]", 400),
	} {
		add([]byte(s))
	}
}

// nestingDepth is the maximal nesting of a valid JSON document.
func nestingDepth(b []byte) int {
	depth, max := 0, 0
	in, esc := false, false
	for _, c := range b {
		switch {
		case in && esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && (c == '{' || c == '['):
			depth++
			max = maxInt(max, depth)
		case !in && (c == '}' || c == ']'):
			depth--
		}
	}
	return max
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// FuzzValidJSON: validJSON agrees with encoding/json.Valid, up to the depth
// bound.
func FuzzValidJSON(f *testing.F) {
	seedPayloads(f, func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, b []byte) {
		got, want := validJSON(b), json.Valid(b)
		if want && nestingDepth(b) > maxJSONDepth {
			want = false
		}
		if got != want {
			t.Fatalf("validJSON=%v encoding/json=%v for %q", got, want, b)
		}
	})
}

// FuzzLazyJSON: on valid documents the lazy reader sees what
// encoding/json sees; on any bytes it does not panic.
func FuzzLazyJSON(f *testing.F) {
	seedPayloads(f, func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, b []byte) {
		pl, ok := readPayload(&doc{b: append([]byte(" "), b...)}) // never panics, valid or not
		var idx jsonIndex
		if !validate(b, &idx) {
			return
		}
		// The indexed reads and the byte scans agree.
		withIdx, okIdx := readPayload(&doc{b: b, idx: &idx})
		if okIdx != ok || withIdx.action.string() != pl.action.string() ||
			withIdx.doc.get(withIdx.repository, "full_name").string() != pl.repository.get("full_name").string() ||
			withIdx.doc.get(withIdx.comment, "body").string() != pl.comment.get("body").string() ||
			intOf(withIdx.issue.number) != intOf(pl.issue.number) {
			t.Fatalf("indexed and scanned reads differ on %q", b)
		}
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if dec.Decode(&m) != nil {
			if ok {
				t.Fatalf("readPayload accepted a non-object %q", b)
			}
			return
		}
		if !ok {
			t.Fatalf("readPayload refused an object %q", b)
		}
		str := func(x any) (string, bool) { s, ok := x.(string); return s, ok }
		check := func(what string, v jv, x any) {
			s, isStr := str(x)
			got, gotOK := v.str()
			if isStr != gotOK || s != got {
				t.Fatalf("%s: lazy %q,%v; encoding/json %q,%v in %q", what, got, gotOK, s, isStr, b)
			}
		}
		check("action", pl.action, m["action"])
		repo, _ := m["repository"].(map[string]any)
		check("repository.full_name", pl.repository.get("full_name"), repo["full_name"])
		cm, _ := m["comment"].(map[string]any)
		check("comment.body", pl.comment.get("body"), cm["body"])
		is, _ := m["issue"].(map[string]any)
		if n, ok := is["number"].(json.Number); ok {
			want, err := n.Int64()
			if err != nil || want <= 0 || want >= 1<<31 {
				want = 0
			}
			if got := intOf(pl.issue.number); int64(got) != want {
				t.Fatalf("issue.number: lazy %d, encoding/json %v in %q", got, n, b)
			}
		}
	})
}

// FuzzSignatureHeader: any header, any body: no panic, and only the exact
// signature verifies.
func FuzzSignatureHeader(f *testing.F) {
	secret := []byte("s3cret")
	f.Add("sha256=", []byte("{}"))
	f.Add(Sign(secret, []byte("{}")), []byte("{}"))
	f.Add("sha1=abc", []byte("x"))
	f.Add("sha256="+strings.Repeat("0", 64), []byte(""))
	f.Add(strings.ToUpper(Sign(secret, []byte("a"))), []byte("a"))
	r, err := NewReceiver(testConfig(), ReceiverDeps{Sink: newMemSink()})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		got := r.verify(header, body)
		want := header == Sign(secret, body)
		if got != want {
			t.Fatalf("verify(%q)=%v, want %v", header, got, want)
		}
	})
}

// FuzzFormWebhook drives a signed form-encoded delivery through the
// receiver: any form body answers 202 or 400, never panics, and what is
// kept is exactly the form's one payload field.
func FuzzFormWebhook(f *testing.F) {
	seedPayloads(f, func(b []byte) { f.Add([]byte("payload=" + url.QueryEscape(string(b)))) })
	for _, s := range []string{"", "payload=", "payload=%7B%7D&payload=%7B%7D", "payload=%zz", "a=1&payload=%7B%7D;x", "payload=%7B%7D&"} {
		f.Add([]byte(s))
	}
	cfg := testConfig()
	sink := &lastSink{}
	r, err := NewReceiver(cfg, ReceiverDeps{Sink: sink})
	if err != nil {
		f.Fatal(err)
	}
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, form []byte) {
		sink.last.Store(nil)
		req := httptest.NewRequest(http.MethodPost, "/gh-webhook", bytes.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-GitHub-Event", "issue_comment")
		req.Header.Set("X-GitHub-Delivery", "fuzz-"+strconv.FormatInt(n.Add(1), 10))
		req.Header.Set("X-Hub-Signature-256", Sign(cfg.Secret, form))
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusAccepted, http.StatusBadRequest:
		default:
			t.Fatalf("status %d for %q", rec.Code, form)
		}
		v, perr := url.ParseQuery(string(form))
		if rec.Code == http.StatusAccepted && (perr != nil || len(v["payload"]) != 1) {
			t.Fatalf("accepted a form without exactly one payload field: %q", form)
		}
		if ev := sink.last.Load(); ev != nil {
			if p := v.Get("payload"); string(ev.Payload) != p && !(p == "" && string(ev.Payload) == "{}") {
				t.Fatalf("kept %q, the form's payload is %q", ev.Payload, p)
			}
		}
	})
}

// lastSink keeps the last event it was given.
type lastSink struct{ last atomic.Pointer[Event] }

func (s *lastSink) Put(_ context.Context, ev *Event) error { s.last.Store(ev); return nil }

var fuzzRouterOnce sync.Once
var fuzzRouter *Router

// FuzzRoute: payload → Event never panics; a routed Event names valid
// refs, an authorized actor when one is required, and encodes to JSON (its
// Payload is valid JSON).
func FuzzRoute(f *testing.F) {
	seedPayloads(f, func(b []byte) {
		for _, ev := range []string{"issue_comment", "pull_request", "issues", "pull_request_review", "status", "check_run"} {
			f.Add(ev, b)
		}
	})
	fuzzRouterOnce.Do(func() {
		cfg := testConfig()
		cfg.Repositories = append(cfg.Repositories, "*/*", "a/*")
		cfg.Repositories = []string{"Codertocat/Hello-World", "octo/repo", "a/*"}
		fuzzRouter, _ = NewRouter(cfg, RouterDeps{Dedup: NewDeduper(16, 0, nil)})
	})
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		ev, drop, err := fuzzRouter.Route(event, "fuzz", body)
		if ev == nil {
			if (drop == "") == (err == nil) {
				t.Fatalf("exactly one of drop (%q) and err (%v) must be set", drop, err)
			}
			return
		}
		if len(ev.WorkItems) == 0 {
			t.Fatal("an Event without work items")
		}
		for _, w := range ev.WorkItems {
			back, err := workitem.Parse(w.String())
			if err != nil || back != w {
				t.Fatalf("ref %#v does not round-trip: %v", w, err)
			}
		}
		if ev.Actor != "" && !fuzzRouter.Authorized(ev.Actor) && ev.Action != "closed" {
			t.Fatalf("unauthorized actor %q routed", ev.Actor)
		}
		for _, c := range ev.Comments {
			if SelfAuthored(c.Body) {
				t.Fatal("a self-authored comment routed")
			}
			if c.Item != "" {
				if _, err := workitem.Parse(c.Item); err != nil {
					t.Fatalf("comment item %q does not parse: %v", c.Item, err)
				}
			}
		}
		if len(ev.Comments) > 0 {
			var m struct {
				Sender struct {
					Login string `json:"login"`
				} `json:"sender"`
			}
			// Where encoding/json reads the payload, its sender is the
			// comment's author (docs/decisions.md §19).
			if json.Unmarshal(body, &m) == nil && m.Sender.Login != ev.Actor {
				t.Fatalf("comment by %q routed with sender %q", ev.Actor, m.Sender.Login)
			}
		}
		if ev.Control != nil && !ev.Control.Ambiguous && !ev.Control.Command.Valid() {
			t.Fatalf("control %q is not a command", ev.Control.Command)
		}
		if _, err := json.Marshal(ev); err != nil {
			t.Fatalf("the Event does not encode: %v", err)
		}
	})
}

// FuzzExtraction: branch names and PR bodies never panic the extractors
// and only ever yield valid refs.
func FuzzExtraction(f *testing.F) {
	for _, s := range []string{"issue-12", "feat/Issue/7-x", "issue-", "issue-99999999999", "Fixes #3 closes o/r#4 resolves https://github.com/a/b/issues/5 fixed GH-6",
		"fix https://ghe.example.com/a/b/issues/1", "closes ../..#1", "closes a/b#0", "fixes:\t#12",
		"closes -x/repo#1", "fixes a/-b#2", "resolves https://ghe.example.com:0/a/b/issues/3"} {
		f.Add(s)
	}
	r := repoOf{owner: "octo", repo: "repo"}
	f.Fuzz(func(t *testing.T, s string) {
		if n := branchIssue(s); n < 0 || n >= 1<<31 {
			t.Fatalf("branch number %d", n)
		}
		var x extraction
		for _, ref := range closingKeywords(s, r) {
			x.add(ref, RefFromKeyword)
		}
		for _, ref := range x.refs {
			if back, err := workitem.Parse(ref.String()); err != nil || back != ref {
				t.Fatalf("closing ref %#v does not round-trip: %v", ref, err)
			}
		}
	})
}

// FuzzParseControl: any body yields nil, Ambiguous, or one of Commands;
// quoting every line or fencing the body silences it.
func FuzzParseControl(f *testing.F) {
	for _, s := range []string{"the-loop start", "/the-loop stop\nthe-loop start", "> the-loop start", "```\nthe-loop do x\n```",
		"the-loop start not", "    the-loop pause", "the-loop contribute: x", "THE-LOOP RESUME!", "the-loop cleanup?", "\tthe-loop execute"} {
		f.Add(s)
	}
	kt, err := newKeywordTable(DefaultControlConfig())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		got := kt.parse(body)
		if got != nil && !got.Ambiguous && !got.Command.Valid() {
			t.Fatalf("command %q from %q", got.Command, body)
		}
		var quoted strings.Builder
		for _, line := range strings.Split(body, "\n") {
			quoted.WriteString("> " + line + "\n")
		}
		if c := kt.parse(quoted.String()); c != nil {
			t.Fatalf("quoted body %q yields %+v", quoted.String(), c)
		}
		if !strings.Contains(body, "```") && !strings.Contains(body, "~~~") {
			if c := kt.parse("````\n" + body + "\n````"); c != nil {
				t.Fatalf("fenced body %q yields %+v", body, c)
			}
		}
	})
}

// FuzzPollLedger: any bytes in a portable record never panic the store;
// a ledger written is read back equal; Resolve keeps the cap and no
// duplicates; ResolveVersion records the version (key doubles as one).
func FuzzPollLedger(f *testing.F) {
	f.Add([]byte(`{"ref":"github:octo/repo#1","poll":{"seenComments":["comment-1"],"commentAttempts":{"comment-2":1}}}`), "comment-3")
	f.Add([]byte(`{"ref":"github:octo/repo#1","poll":null,"control":{"command":"start"}}`), "review-1")
	f.Add([]byte(`not json`), "x")
	f.Add([]byte(`{"ref":"github:other/repo#1","poll":{}}`), "")
	f.Add([]byte(`{"poll":{"seenComments":"nope"}}`), "c")
	f.Add([]byte(`{"ref":"github:octo/repo#1","poll":{"seenComments":["comment-1"],"commentVersions":{"comment-1":"2026-01-01T00:00:00Z","comment-9":""}}}`), "comment-1")
	f.Add([]byte(`{"ref":"github:octo/repo#1","poll":{"commentVersions":{"comment-1":7}}}`), "comment-1")
	f.Add([]byte(`{"ref":"github:octo/repo#1","poll":{"commentVersions":null}}`), "")
	ref := workitem.Ref{Provider: "github", Owner: "octo", Repo: "repo", Number: 1}
	f.Fuzz(func(t *testing.T, file []byte, key string) {
		s := NewPortableStore(t.TempDir(), nil)
		if err := os.MkdirAll(s.Dir(), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.Path(ref), file, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _ = s.Control(ref)
		_, _ = s.StartRequested(ref)
		_, _ = s.PolledRefs()
		l, err := s.PollLedger(ref)
		if err != nil || l == nil {
			l = &PollLedger{}
		}
		if !utf8.ValidString(key) {
			return
		}
		l.Resolve(key)
		l.Resolve(key)
		n := 0
		for _, k := range l.SeenComments {
			if k == key {
				n++
			}
		}
		if n > 1 || len(l.SeenComments) > MaxSeenComments {
			t.Fatalf("ledger holds %q %d times, %d keys", key, n, len(l.SeenComments))
		}
		l.ResolveVersion(key, key)
		if v, ok := l.Version(key); ok != (key != "" && l.Seen(key)) || (ok && v != key) {
			t.Fatalf("ResolveVersion(%q): version %q, %v", key, v, ok)
		}
		if err := s.SavePollLedger(ref, l); err != nil {
			return // a record of another ref under this slug is refused, never overwritten
		}
		back, err := s.PollLedger(ref)
		if err != nil || back == nil {
			t.Fatalf("saved ledger unreadable: %v", err)
		}
		a, _ := json.Marshal(l)
		b, _ := json.Marshal(back)
		if !bytes.Equal(a, b) {
			t.Fatalf("ledger %s read back as %s", a, b)
		}
	})
}
