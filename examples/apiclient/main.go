// Command apiclient shows how a Go program talks to a running loopd
// through package loop/api, the client loopctl itself uses: over the
// control socket under loopd's state root (or TCP with the service token),
// it lists the work items loopd knows, what waits on a human, and the
// event names its log holds. docs/embedding.md walks through it.
//
//	go run ./examples/apiclient --state-root ~/.the-loop
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/theloop-dev/theloop/loop/api"
)

// report prints loopd's work items, its "needs you" list and its event
// names.
func report(ctx context.Context, c *api.Client, out io.Writer) error {
	items, err := c.WorkItems(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d work items\n", len(items))
	for _, it := range items {
		fmt.Fprintf(out, "  %s at %s (%s)\n", it.Ref, it.Node, it.State)
	}
	waiting, err := c.Attention(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d waiting on a human\n", len(waiting))
	for _, a := range waiting {
		fmt.Fprintf(out, "  %s: %s (%s)\n", a.Ref, a.Kind, a.Why)
	}
	types, err := c.EventTypes(ctx)
	if err != nil {
		return err
	}
	for _, et := range types {
		fmt.Fprintf(out, "event %s ×%d\n", et.Name, et.Count)
	}
	// Any route without a typed call: Do with the wire types.
	var st api.Status
	if err := c.Do(ctx, "GET", "/status", nil, nil, &st); err != nil {
		return err
	}
	fmt.Fprintf(out, "loopd %s, %d live sessions\n", st.Version, st.LiveSessions)
	return nil
}

func main() {
	root := flag.String("state-root", os.Getenv("THE_LOOP_STATE_ROOT"), "loopd's state root (its loopd.sock is used)")
	url := flag.String("url", "", "loopd's TCP control plane instead (http://host:port; token in $"+api.DefaultTokenEnv+")")
	flag.Parse()
	c := api.NewSocketClient(api.SocketPath(*root))
	if *url != "" {
		c = api.NewTCPClient(*url, os.Getenv(api.DefaultTokenEnv), nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := report(ctx, c, os.Stdout); err != nil {
		var ae *api.APIError
		switch {
		case errors.Is(err, api.ErrUnreachable):
			fmt.Fprintln(os.Stderr, "apiclient: no loopd answers; is it running with this state root?")
		case errors.As(err, &ae):
			fmt.Fprintf(os.Stderr, "apiclient: loopd refused (%d): %s\n", ae.Status, ae.Detail)
		default:
			fmt.Fprintln(os.Stderr, "apiclient:", err)
		}
		os.Exit(1)
	}
}
