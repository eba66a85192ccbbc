package integrations

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// However many callers fan out at once, one API transport keeps at most
// maxGitHubRequests requests in flight; a caller whose context ends while
// it waits for a slot gets its context's error, not a request.
func TestGitHubAPIBoundsRequestsInFlight(t *testing.T) {
	release := make(chan struct{})
	var inFlight, most, served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		served.Add(1)
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	base, err := url.Parse(srv.URL)
	require.NoError(t, err)
	tok := &secret{what: "GitHub token", env: []string{"T"}, lookup: func(string) (string, bool) { return "t0ken", true }, red: &redactor{}}
	const callers = 3 * maxGitHubRequests
	a := newGitHubAPI(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: callers}}, base, tokenCredential{tok})

	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := a.do(context.Background(), ghRequest{method: http.MethodGet, path: "repos/o/r/issues/1"})
			if err == nil && resp.status != http.StatusOK {
				err = fmt.Errorf("status %d", resp.status)
			}
			errs <- err
		}()
	}
	require.Eventually(t, func() bool { return inFlight.Load() == maxGitHubRequests }, 10*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, int32(maxGitHubRequests), most.Load(), "at most %d requests in flight", maxGitHubRequests)

	// A caller that gives up while waiting for a slot sends nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = a.do(ctx, ghRequest{method: http.MethodGet, path: "repos/o/r/issues/2"})
	require.ErrorIs(t, err, context.DeadlineExceeded)

	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int32(callers), served.Load(), "every waiting request was sent in the end")
	require.LessOrEqual(t, most.Load(), int32(maxGitHubRequests))
}
