package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startListening starts loopd, whose configuration names webhook port 0,
// and returns the address it bound ("127.0.0.1:N") from its "listening"
// log line. The kernel picks the port at bind time: a port the test picked
// and closed could be taken by a parallel test package before loopd binds
// it (natstest met exactly that on CI). The child's output goes to logs,
// which is printed when the test fails.
func startListening(t *testing.T, cmd *exec.Cmd, logs *lockedBuffer) string {
	t.Helper()
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start loopd: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(logs.String(), "\n") {
			var rec struct {
				Msg     string `json:"msg"`
				Webhook string `json:"webhook"`
			}
			if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "listening" {
				continue
			}
			u, err := url.Parse(rec.Webhook)
			if err != nil || u.Host == "" {
				t.Fatalf("loopd's listening line has no webhook URL: %s", line)
			}
			return u.Host
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("loopd did not log that it is listening within 30s; its output:\n%s", logs.String())
	return ""
}

// waitAnswering waits until loopd at addr answers /healthz at all (any
// status): its listener is up.
func waitAnswering(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("loopd did not answer at %s within 30s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
