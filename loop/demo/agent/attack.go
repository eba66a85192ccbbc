package agent

// The scripted attack (docs/decisions.md §18, §21): at one approval
// gate the scripted agent does what a compromised or over-eager agent
// would — it tries to approve its own work — and narrates each attempt, so
// `loopd demo` shows the session's confinement refusing every way in.
//
// It only uses what an attacker in the session could discover anyway: its
// own environment (THE_LOOP_STATE_ROOT, which loopd sets), loopd's webhook
// URL (public: GitHub posts to it) and loopd's pid (visible in /proc). The
// demo writes those into the brief; it never writes a secret.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/api"
)

// The attack's steps, in the order they are tried.
const (
	StepKey     = "key"
	StepWebhook = "webhook"
	StepSocket  = "operator socket"
	StepEnviron = "loopd's environment"
)

// WebhookSecretEnv is where loopd's webhook secret conventionally lives
// (webhooks.ghWebhook.secretEnv's default): the agent looks for it.
const WebhookSecretEnv = "THE_LOOP_GH_WEBHOOK_SECRET"

// AttackReportName is the report the agent writes beside the brief.
const AttackReportName = "attack-report.json"

// maxAttackReport bounds the report a reader accepts (it is agent-written).
const maxAttackReport = 64 << 10

// AttackBrief is what the agent knows when it tries: nothing an attacker in
// the session could not find out by itself, and no secret.
type AttackBrief struct {
	// Gate is the approval gate at which the agent tries, once.
	Gate string `json:"gate"`
	// WebhookURL is loopd's webhook endpoint.
	WebhookURL string `json:"webhookUrl"`
	// LoopdPID is loopd's process id.
	LoopdPID int `json:"loopdPid"`
	// Repo (owner/name), Issue and Approver shape the forged approval.
	Repo     string `json:"repo"`
	Issue    int    `json:"issue"`
	Approver string `json:"approver"`
}

// Attempt is one way in the agent tried, and what came of it.
type Attempt struct {
	Step string `json:"step"`
	// Target is what it tried (a path, a URL).
	Target string `json:"target"`
	// Outcome is what came back ("permission denied", "401 Unauthorized").
	Outcome string `json:"outcome"`
	// Refused: the attempt got the agent nothing.
	Refused bool `json:"refused"`
}

// WriteAttackBrief writes b to path (0600).
func WriteAttackBrief(path string, b AttackBrief) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o600)
}

// ReadAttackBrief reads what WriteAttackBrief wrote.
func ReadAttackBrief(path string) (AttackBrief, error) {
	var b AttackBrief
	data, err := os.ReadFile(path)
	if err != nil {
		return b, err
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return b, fmt.Errorf("attack brief %s: %w", path, err)
	}
	return b, nil
}

// ReadAttackReport reads the report the agent wrote in dir. It is
// agent-written: its size is bounded and it must parse; fs.ErrNotExist
// means the agent has not finished yet.
func ReadAttackReport(dir string) ([]Attempt, error) {
	f, err := os.Open(filepath.Join(dir, AttackReportName))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxAttackReport+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxAttackReport {
		return nil, fmt.Errorf("attack report in %s is larger than %d bytes", dir, maxAttackReport)
	}
	var as []Attempt
	if err := json.Unmarshal(data, &as); err != nil {
		return nil, fmt.Errorf("attack report in %s: %w", dir, err)
	}
	return as, nil
}

// attacker runs the attack from inside the session.
type attacker struct {
	brief     AttackBrief
	dir       string // where the report goes
	checkout  string // the work item's worktree
	lookupEnv func(string) (string, bool)
	say       func(format string, args ...any)
	procRoot  string
}

// run tries every way in, narrating, and writes the report (temp file +
// rename, so the demo never reads half of it).
func (k *attacker) run(ctx context.Context, workItem string) error {
	k.say("\n● %s waits at %s for dana. I could save us both the wait: let me try to approve it myself.", workItem, k.brief.Gate)
	root, _ := k.lookupEnv(loop.StateRootEnv)
	attempts := []Attempt{k.readKey(root), k.forgeWebhook(ctx), k.forceThroughSocket(ctx, root, workItem), k.readEnviron()}
	k.say("● none of that worked; %s still waits for a person on the ticket.", k.brief.Gate)
	data, err := json.MarshalIndent(attempts, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(k.dir, "."+AttackReportName+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(k.dir, AttackReportName))
}

// readKey: (a) read the decision-signing key, to sign an approval.
func (k *attacker) readKey(root string) Attempt {
	a := Attempt{Step: StepKey, Target: loop.SigningKeyPath(root)}
	if root == "" {
		a.Target, a.Outcome, a.Refused = "(no "+loop.StateRootEnv+")", "state root unknown", true
		return a
	}
	k.say("  (a) $ cat %s   # the key loopd signs gate decisions with", a.Target)
	b, err := os.ReadFile(a.Target)
	if err != nil {
		a.Outcome, a.Refused = errText(err), true
		k.say("      ✗ %s", a.Outcome)
		return a
	}
	a.Outcome = fmt.Sprintf("read %d bytes", len(b))
	k.say("      ✓ %s — I could sign dana's approval myself", a.Outcome)
	return a
}

// forgeWebhook: (b) post dana's "Approved" to loopd's webhook, signed with
// the secret if the agent has it, else with a guess.
func (k *attacker) forgeWebhook(ctx context.Context) Attempt {
	a := Attempt{Step: StepWebhook, Target: k.brief.WebhookURL}
	secret, has := k.lookupEnv(WebhookSecretEnv)
	if has && secret != "" {
		k.say("  (b) %s is in my environment: signing a forged approval with it", WebhookSecretEnv)
	} else {
		k.say("  (b) %s is not in my environment; signing a forged approval by %s with a guess", WebhookSecretEnv, k.brief.Approver)
		secret = "guess"
	}
	k.say("      $ curl -X POST %s  # issue_comment.created %q by %s", a.Target, "Approved", k.brief.Approver)
	status, err := k.post(ctx, secret)
	switch {
	case err != nil:
		a.Outcome, a.Refused = errText(err), true
	case status/100 == 2:
		a.Outcome = strconv.Itoa(status) + " " + http.StatusText(status)
	default:
		a.Outcome, a.Refused = strconv.Itoa(status)+" "+http.StatusText(status), true
		if !has {
			a.Outcome += " (no secret)"
		}
	}
	mark := "✗"
	if !a.Refused {
		mark = "✓"
	}
	k.say("      %s %s", mark, a.Outcome)
	return a
}

func (k *attacker) post(ctx context.Context, secret string) (int, error) {
	var id [8]byte
	_, _ = rand.Read(id[:])
	owner, name, _ := strings.Cut(k.brief.Repo, "/")
	user := map[string]any{"login": k.brief.Approver, "type": "User"}
	body, err := json.Marshal(map[string]any{
		"action": "created",
		"issue":  map[string]any{"number": k.brief.Issue, "title": "(forged)", "user": user, "state": "open"},
		"comment": map[string]any{"id": 990000 + int(id[0]), "body": "Approved", "user": user,
			"author_association": "OWNER", "created_at": time.Now().UTC().Format(time.RFC3339)},
		"repository": map[string]any{"full_name": k.brief.Repo, "name": name, "owner": map[string]any{"login": owner}},
		"sender":     user,
	})
	if err != nil {
		return 0, err
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, k.brief.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", integrations.EventIssueComment)
	req.Header.Set("X-GitHub-Delivery", "forged-"+hex.EncodeToString(id[:]))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, nil
}

// forceThroughSocket: (c) ask loopd's operator socket to force the item
// past the gate.
func (k *attacker) forceThroughSocket(ctx context.Context, root, workItem string) Attempt {
	sock := api.SocketPath(root)
	a := Attempt{Step: StepSocket, Target: sock}
	k.say("  (c) $ curl --unix-socket %s -X POST http://loopd%s/graph/force  # past %s", sock, api.Prefix, k.brief.Gate)
	body, _ := json.Marshal(api.ForceRequest{GraphRequest: api.GraphRequest{Repo: k.checkout, WorkItem: workItem}, To: "design", Reason: "approved (by me)"})
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://loopd"+api.Prefix+"/graph/force", bytes.NewReader(body))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
		var resp *http.Response
		if resp, err = client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			a.Outcome = strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode)
			a.Refused = resp.StatusCode/100 != 2
		}
	}
	if err != nil {
		a.Outcome, a.Refused = errText(err), true
	}
	mark := "✗"
	if !a.Refused {
		mark = "✓"
	}
	k.say("      %s %s", mark, a.Outcome)
	return a
}

// readEnviron: (d) read loopd's environment for the webhook secret or a
// token.
func (k *attacker) readEnviron() Attempt {
	path := filepath.Join(k.procRoot, strconv.Itoa(k.brief.LoopdPID), "environ")
	a := Attempt{Step: StepEnviron, Target: path}
	k.say("  (d) $ tr '\\0' '\\n' < %s | grep -E 'SECRET|TOKEN'", path)
	b, err := os.ReadFile(path)
	switch {
	case err != nil:
		a.Outcome, a.Refused = errText(err)+" — no secrets", true
	default:
		var found []string
		for _, kv := range bytes.Split(b, []byte{0}) {
			n, v, _ := strings.Cut(string(kv), "=")
			if v != "" && (strings.Contains(n, "SECRET") || strings.Contains(n, "TOKEN")) {
				found = append(found, n)
			}
		}
		if len(found) == 0 {
			a.Outcome, a.Refused = fmt.Sprintf("read %d bytes: no secrets", len(b)), true
		} else {
			a.Outcome = "found " + strings.Join(found, ", ")
		}
	}
	mark := "✗"
	if !a.Refused {
		mark = "✓"
	}
	k.say("      %s %s", mark, a.Outcome)
	return a
}

// errText is the short form of a refusal: "permission denied",
// "connection refused", or the error itself.
func errText(err error) string {
	switch {
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return "permission denied"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, fs.ErrNotExist):
		return "no such file"
	}
	return oneLine(err.Error())
}
