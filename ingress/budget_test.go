package ingress

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// crowdPayload is a small issue comment on a served repository.
func crowdPayload(i int) []byte {
	return fmt.Appendf(nil, `{"action":"created","issue":{"number":7,"title":"t","labels":[],"user":{"login":"alice"}},`+
		`"comment":{"id":%d,"body":"hello %d","user":{"login":"alice"},"updated_at":"2026-01-01T00:00:00Z"},`+
		`"repository":{"full_name":"octo/repo","name":"repo","owner":{"login":"octo"}},"sender":{"login":"alice"}}`, 1000+i, i)
}

// slowCrowd keeps n connections open from local (an address of 127/8)
// to addr, each POSTing under a well-formed wrong signature a body that
// declares 25 MB, sends 1 KB and then a byte every trickle. A connection
// that is answered (or closed) is dialled again after a pause, so the
// crowd stays n strong until stop is called. It returns the answers seen.
func slowCrowd(t *testing.T, addr, local string, n int, trickle time.Duration) (answers *sync.Map, stop func()) {
	answers = &sync.Map{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	head := "POST /gh-webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: crowd-%d-%d\r\n" +
		"X-Hub-Signature-256: sha256=" + strings.Repeat("0", 64) + "\r\nContent-Type: application/json\r\nContent-Length: 25000000\r\n\r\n"
	kb := bytes.Repeat([]byte{'{'}, 1024)
	count := func(k string) {
		v, _ := answers.LoadOrStore(k, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for try := 0; ctx.Err() == nil; try++ {
				conn, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					count("dial-error")
					select {
					case <-ctx.Done():
					case <-time.After(50 * time.Millisecond):
					}
					continue
				}
				answered := make(chan struct{})
				go func() {
					defer close(answered)
					resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
					if err != nil {
						count("reset")
						return
					}
					resp.Body.Close()
					count(fmt.Sprint(resp.StatusCode))
				}()
				_, err = fmt.Fprintf(conn, head, i, try)
				if err == nil {
					_, err = conn.Write(kb)
				}
				for err == nil {
					select {
					case <-ctx.Done():
						err = ctx.Err()
					case <-answered:
						err = net.ErrClosed
					case <-time.After(trickle):
						_, err = conn.Write([]byte{' '})
					}
				}
				conn.Close()
				<-answered
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
	}
	return answers, sync.OnceFunc(func() { cancel(); wg.Wait() })
}

// TestSlowCrowdLeavesRoomForSigned is issue 34's attack on a small budget:
// 600 connections from one address (127.0.0.2), each with a wrong
// signature, a declared 25 MB, 1 KB sent and then a trickle, redialled
// whenever they are refused. Every signed delivery from another address
// (127.0.0.1) is answered 202 while they hold on, the crowd holds no more
// than its share, and the whole budget comes back when it leaves.
func TestSlowCrowdLeavesRoomForSigned(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 600 connections")
	}
	if l, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Skipf("127.0.0.2 is not a local address here: %v", err)
	} else {
		l.Close()
	}
	cfg := testConfig()
	sink := newMemSink()
	r, err := NewReceiver(cfg, ReceiverDeps{Sink: sink})
	require.NoError(t, err)
	// A budget 600 KB of first kilobytes overflows: 256 KiB, with room for
	// a 64 KiB body (the 25 MB the crowd declares is never read).
	r.budget = newBodyBudget(256<<10, 64<<10)
	srv := httptest.NewUnstartedServer(r)
	srv.Listener.Close()
	srv.Listener, err = net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	srv.Start()
	defer srv.Close()

	answers, stop := slowCrowd(t, srv.Listener.Addr().String(), "127.0.0.2", 600, 200*time.Millisecond)
	defer stop()
	shared := r.budget.limit - r.budget.reserve
	require.Eventually(t, func() bool { return r.budget.heldBy("127.0.0.2") >= shared*3/4 }, 60*time.Second, 20*time.Millisecond,
		"the crowd fills its share of the budget")

	const signed = 60
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}).DialContext}}
	var wg sync.WaitGroup
	codes := make([]int, signed)
	for i := range signed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := crowdPayload(i)
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/gh-webhook", bytes.NewReader(body))
			req.Header.Set("X-GitHub-Event", "issue_comment")
			req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("signed-%d", i))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Hub-Signature-256", Sign(cfg.Secret, body))
			resp, err := client.Do(req)
			if err != nil {
				codes[i] = -1
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
		if i%6 == 5 {
			wg.Wait() // six at a time, as GitHub's bursts come
		}
	}
	wg.Wait()
	crowdHeld := r.budget.heldBy("127.0.0.2")
	stop()
	seen := map[string]int64{}
	answers.Range(func(k, v any) bool { seen[k.(string)] = v.(*atomic.Int64).Load(); return true })
	t.Logf("crowd answers %v; crowd held %d KiB of a %d KiB budget (shared %d KiB); peak %d KiB",
		seen, crowdHeld>>10, r.budget.limit>>10, shared>>10, r.budget.highWater()>>10)

	for i, c := range codes {
		require.Equal(t, http.StatusAccepted, c, "signed delivery %d", i)
	}
	require.Len(t, sink.all(), signed, "every signed delivery is kept")
	require.LessOrEqual(t, r.budget.highWater(), r.budget.limit)
	require.LessOrEqual(t, crowdHeld, shared, "one address holds no more than the shared part")
	require.Positive(t, seen["503"], "the crowd's chunks past its share are refused")
	require.Eventually(t, func() bool { return r.budget.inUse() == 0 }, 10*time.Second, 10*time.Millisecond,
		"every chunk goes back when the crowd leaves")
}

// TestBudgetChargesWhatWasRead: a request that declared 25 MB and sent
// 1 KB holds at most twice what it sent, and nothing before its first byte.
func TestBudgetChargesWhatWasRead(t *testing.T) {
	r, err := NewReceiver(testConfig(), ReceiverDeps{Sink: newMemSink()})
	require.NoError(t, err)
	srv := httptest.NewServer(r)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	fmt.Fprintf(conn, "POST /gh-webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Delivery: d1\r\nX-Hub-Signature-256: sha256=%s\r\nContent-Length: 25000000\r\n\r\n", strings.Repeat("0", 64))
	// No byte of the body yet: nothing held (the handler is waiting for one).
	time.Sleep(100 * time.Millisecond)
	require.Zero(t, r.budget.inUse())
	_, err = conn.Write(bytes.Repeat([]byte{'x'}, 1024))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return r.budget.inUse() > 0 }, 10*time.Second, 5*time.Millisecond)
	require.LessOrEqual(t, r.budget.inUse(), int64(2*1024))
}

// TestBodyBudgetShares: the rules of take, by table.
func TestBodyBudgetShares(t *testing.T) {
	type step struct {
		addr string
		n    int64
		ok   bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"one address takes the shared part, not the reserve", []step{{"a", 192 << 10, true}, {"a", 512, false}}},
		{"a newcomer finds the reserve", []step{{"a", 192 << 10, true}, {"b", 32 << 10, true}, {"c", 32 << 10, true}, {"d", 512, false}}},
		{"a quiet address past quiet is refused in a full budget", []step{{"a", 192 << 10, true}, {"b", 32 << 10, true}, {"b", 512, false}}},
		{"two addresses share", []step{{"a", 64 << 10, true}, {"b", 96 << 10, true}, {"b", 1, false}, {"a", 32 << 10, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBodyBudget(256<<10, 64<<10)
			require.Equal(t, int64(64<<10), b.reserve)
			for i, s := range tc.steps {
				require.Equal(t, s.ok, b.take(s.addr, s.n), "step %d: %s takes %d", i, s.addr, s.n)
			}
			require.LessOrEqual(t, b.inUse(), b.limit)
		})
	}
}
