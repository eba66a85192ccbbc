package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/theloop-dev/theloop/loop/daemon/dashboard"
)

// dashPanes is the dashboard's view of the sessions' panes: the same
// screen capture and reply path as the control plane's (operatorverbs.go),
// so a reply from the page is authorized, marked and recorded alike.
type dashPanes struct{ d *Daemon }

func (p dashPanes) Screen(ctx context.Context, ref string) (string, error) {
	return p.d.desk.Screen(ctx, ref)
}

func (p dashPanes) Reply(ctx context.Context, ref, actor, message string) error {
	_, err := p.d.desk.reply(ctx, ref, actor, message)
	if errors.Is(err, errControlKeyword) {
		return fmt.Errorf("%w: %v", dashboard.ErrReplyRefused, err)
	}
	return err
}

var _ dashboard.Panes = dashPanes{}
