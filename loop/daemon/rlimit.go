package daemon

import (
	"syscall"

	"github.com/theloop-dev/theloop/ingress"
)

// Descriptors.
//
// loopd needs file descriptors for its queue's files, the event and audit
// logs, git and tmux children, the control socket and every webhook
// connection. Only the last are in a stranger's hands, so they get a share
// of the process's limit and no more: the rest stays a reserve from which
// the control socket (the operator's way in), the store and the sessions
// are served however the webhook port is flooded.

// webhookConnShare is the part of the descriptor limit the webhook port may
// hold; maxWebhookConns caps it on hosts with a very high limit (each
// connection also costs a goroutine and buffers).
const (
	webhookConnShare = 2 // one half
	maxWebhookConns  = 8192
	minWebhookConns  = 32
	// webhookPerIPShare: one remote address may hold an eighth of the
	// port's allowance.
	webhookPerIPShare = 8
	// The reserve for quiet addresses (ingress.ConnLimits.Reserve) is an
	// eighth too: the port holds at most 9/16 of the limit.
)

// RaiseFileLimit raises the soft RLIMIT_NOFILE to the hard limit (the
// default soft limit, 1,024 on most systems, is a historical accident for
// select(2), which Go does not use; Go itself raises it at start since Go
// 1.19, this makes sure and reports the result). It returns the soft limit
// now in force (0 when it cannot be read).
func RaiseFileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	if lim.Cur < lim.Max {
		want := lim
		want.Cur = want.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err == nil {
			lim = want
		}
	}
	return uint64(lim.Cur)
}

// webhookConnLimits derives the webhook port's bounds from the descriptor
// limit nofile.
func webhookConnLimits(nofile uint64) ingress.ConnLimits {
	if nofile == 0 {
		return ingress.ConnLimits{}
	}
	total := min(max(int(min(nofile, 1<<30)/webhookConnShare), minWebhookConns), maxWebhookConns)
	return ingress.ConnLimits{Total: total, PerIP: max(total/webhookPerIPShare, 4), Reserve: max(total/webhookPerIPShare, 4)}
}

// raiseWebhookConnLimits raises the descriptor limit and derives the
// webhook port's bounds from it, saying so on loopd's log.
func raiseWebhookConnLimits(logf func(string, ...any)) ingress.ConnLimits {
	nofile := RaiseFileLimit()
	l := webhookConnLimits(nofile)
	if l.Total > 0 {
		logf("descriptors: limit %d; the webhook port holds at most %d connections, %d per address (the rest is kept for the control socket, the queue and the sessions)", nofile, l.Total, l.PerIP)
	}
	return l
}
