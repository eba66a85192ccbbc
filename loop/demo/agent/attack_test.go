package agent

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop"
)

// TestAttackReportsWhatItGot runs the attack unconfined against stand-ins
// and checks that the report is honest both ways: what was refused is
// marked refused, what was reachable is not (so a demo without a sandbox
// can never claim a refusal it did not get).
func TestAttackReportsWhatItGot(t *testing.T) {
	const realSecret = "s3cret"
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mac := hmac.New(sha256.New, []byte(realSecret))
		mac.Write(body)
		if !hmac.Equal([]byte(r.Header.Get("X-Hub-Signature-256")), []byte("sha256="+hex.EncodeToString(mac.Sum(nil)))) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer hook.Close()

	for _, tc := range []struct {
		name    string
		key     bool   // the signing key exists and is readable
		secret  string // the agent's $THE_LOOP_GH_WEBHOOK_SECRET
		environ string // the stand-in for /proc/<pid>/environ ("" = missing)
		want    map[string]Attempt
	}{
		{
			name: "nothing reachable", environ: "",
			want: map[string]Attempt{
				StepKey:     {Outcome: "no such file", Refused: true},
				StepWebhook: {Outcome: "401 Unauthorized (no secret)", Refused: true},
				StepSocket:  {Refused: true},
				StepEnviron: {Outcome: "no such file — no secrets", Refused: true},
			},
		},
		{
			name: "everything reachable", key: true, secret: realSecret, environ: "PATH=/bin\x00THE_LOOP_GH_WEBHOOK_SECRET=x\x00",
			want: map[string]Attempt{
				StepKey:     {Outcome: "read 5 bytes"},
				StepWebhook: {Outcome: "202 Accepted"},
				StepSocket:  {Refused: true},
				StepEnviron: {Outcome: "found THE_LOOP_GH_WEBHOOK_SECRET"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, dir, proc := shortdir.New(t), t.TempDir(), t.TempDir()
			if tc.key {
				require.NoError(t, os.MkdirAll(filepath.Dir(loop.SigningKeyPath(root)), 0o700))
				require.NoError(t, os.WriteFile(loop.SigningKeyPath(root), []byte("key!\n"), 0o600))
			}
			if tc.environ != "" {
				require.NoError(t, os.MkdirAll(filepath.Join(proc, "42"), 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(proc, "42", "environ"), []byte(tc.environ), 0o600))
			}
			env := map[string]string{loop.StateRootEnv: root}
			if tc.secret != "" {
				env[WebhookSecretEnv] = tc.secret
			}
			var narration []string
			k := &attacker{
				brief: AttackBrief{Gate: "requirements-approval", WebhookURL: hook.URL, LoopdPID: 42, Repo: "demo/widgets", Issue: 1, Approver: "dana"},
				dir:   dir, checkout: dir, procRoot: proc,
				lookupEnv: func(n string) (string, bool) { v, ok := env[n]; return v, ok },
				say:       func(f string, a ...any) { narration = append(narration, fmt.Sprintf(f, a...)) },
			}
			require.NoError(t, k.run(context.Background(), "issue-1"))
			got, err := ReadAttackReport(dir)
			require.NoError(t, err)
			require.Len(t, got, 4)
			for _, a := range got {
				w := tc.want[a.Step]
				require.Equal(t, w.Refused, a.Refused, "%+v", a)
				if w.Outcome != "" {
					require.Equal(t, w.Outcome, a.Outcome, "%+v", a)
				}
			}
			require.NotEmpty(t, narration, "each attempt is narrated in the pane")
		})
	}
}

func TestReadAttackReportBoundsItsInput(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadAttackReport(dir)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, os.WriteFile(filepath.Join(dir, AttackReportName), make([]byte, maxAttackReport+1), 0o600))
	_, err = ReadAttackReport(dir)
	require.ErrorContains(t, err, "larger than")
	require.NoError(t, os.WriteFile(filepath.Join(dir, AttackReportName), []byte("{not json"), 0o600))
	_, err = ReadAttackReport(dir)
	require.Error(t, err)
}
