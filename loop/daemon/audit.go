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

// logsSink writes an event to the event log and, when audited, to the
// audit log: one line, formatted once, for both (the two logs share the
// source and the pid). Either log may be nil (unavailable).
type logsSink struct{ events, audit *loop.EventLog }

func (s logsSink) Emit(e graph.LogEvent) {
	audit := s.audit != nil && audited(e.Name)
	var line []byte
	switch {
	case s.events != nil:
		line = s.events.Line(e)
	case audit:
		line = s.audit.Line(e)
	default:
		return
	}
	s.events.EmitLine(line)
	if audit {
		s.audit.EmitLine(line)
	}
}

var _ graph.Sink = logsSink{}

// openAudit opens <state root>/logs/audit.jsonl (written in the
// background, as the event log); loopd runs without it (and says so) when
// it cannot be opened.
func (d *Daemon) openAudit() {
	path := filepath.Join(d.cfg.StateRoot, "logs", AuditLogName)
	el, err := loop.OpenEventLog(path, "loopd", loop.EventLogOptions{Clock: d.deps.Clock, Warnings: d.deps.Log, MaxBytes: auditMaxBytes, MaxBackups: auditMaxBackups, Background: true})
	if err != nil {
		d.logf("the audit log is unavailable: %v", err)
		return
	}
	d.audit = el
}

// FlushLogs writes the event-log and audit-log lines still queued: after
// it returns, a reader of the files sees every event loopd emitted before
// the call. The API's and MCP's event verbs and the dashboard's timeline
// call it before they read; Run's end closes the logs, which flushes them.
// A kill -9 loses the lines still queued (log lines only: the queue, the
// handled records and the sessions' state are written before the events
// that report them, never through these logs).
func (d *Daemon) FlushLogs() {
	d.elog.Flush()
	d.audit.Flush()
}
