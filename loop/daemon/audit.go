package daemon

import (
	"path/filepath"
	"strings"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

// The audit log.
//
// The event log takes everything loopd does, including the counted
// refusals of webhooks nobody signed; a flood of those once rotated
// events.jsonl and its backups until they held nothing else, and the
// record of gate decisions, forces and routing was gone. Refusals are now
// summed up (ingress rate-limits webhook.rejected), but the record of what
// was decided must not depend on that: <state root>/logs/audit.jsonl gets
// a second copy of the events that only authenticated input or loopd itself
// causes — the graph's steps and decisions, forces and skips, routing of
// signed deliveries, control commands, dispatches, the outbox, the
// daemon's own life — and nothing a stranger on the webhook port can
// cause. Only those events grow it, so only they rotate it.

// AuditLogName is the audit log's file name under <state root>/logs.
const AuditLogName = "audit.jsonl"

// Audit log rotation: larger than the event log's, as its lines are rarer.
const (
	auditMaxBytes   = 32 << 20
	auditMaxBackups = 8
)

// auditPrefixes are the event names the audit log keeps. webhook.* (the
// receiver's refusals and warnings, caused by whoever reaches the port) and
// api.request, poll.* (routine, high-volume) are not among them.
var auditPrefixes = []string{
	"graph.", "gate.", "routing.", "control.", "dispatch.", "outbox.",
	"daemon.", "config.", "queue.", "session.", "eventlog.",
}

// audited reports whether an event belongs in the audit log.
func audited(name string) bool {
	for _, p := range auditPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// auditSink passes the audited events to the audit log.
type auditSink struct{ log *loop.EventLog }

func (s auditSink) Emit(e graph.LogEvent) {
	if audited(e.Name) {
		s.log.Emit(e)
	}
}

var _ graph.Sink = auditSink{}

// openAudit opens <state root>/logs/audit.jsonl; loopd runs without it
// (and says so) when it cannot be opened.
func (d *Daemon) openAudit() graph.Sink {
	path := filepath.Join(d.cfg.StateRoot, "logs", AuditLogName)
	el, err := loop.OpenEventLog(path, "loopd", loop.EventLogOptions{Clock: d.deps.Clock, Warnings: d.deps.Log, MaxBytes: auditMaxBytes, MaxBackups: auditMaxBackups})
	if err != nil {
		d.logf("the audit log is unavailable: %v", err)
		return nil
	}
	d.audit = el
	return auditSink{el}
}
