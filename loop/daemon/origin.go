package daemon

import (
	"context"

	"github.com/theloop-dev/theloop/sessions"
)

// originReader answers a checkout's origin URL for the graph link's
// repository-identity guard (docs/daemon.md §8.2) by reading the
// checkout's git configuration file (sessions.OriginURL: bounded, no
// symbolic link followed, includes refused), never by running git there:
// git run in the agent's checkout reads the agent's configuration outside
// the agent's sandbox (docs/decisions.md §22). In a clone Workspaces made,
// .git/config is read-only to the agent, so the answer is loopd's own.
//
// Reading a small file costs less than the process start the guard once
// paid per use, so nothing is cached.
type originReader struct{}

func newOriginCache() *originReader { return &originReader{} }

// url returns the checkout's remote.origin.url (trimmed).
func (*originReader) url(_ context.Context, cwd string) (string, error) {
	return sessions.OriginURL(cwd)
}
