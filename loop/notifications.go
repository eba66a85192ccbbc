package loop

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The daemon's own notifications (cli-config.yaml notifications, the
// operator's; a repository's harness config notifies of graph events
// instead). the-loop's schema names these four events and nothing in it
// raises them; loopd does (docs/daemon.md §11.3).
const (
	// NotifyWorkItemSpawned: loopd started a session for a work item.
	NotifyWorkItemSpawned = "work-item-spawned"
	// NotifySessionDied: a session's harness was found dead (respawned,
	// or given up on).
	NotifySessionDied = "session-died"
	// NotifyDispatchFailed: an event could not be delivered to its session.
	NotifyDispatchFailed = "dispatch-failed"
	// NotifyEventDroppedUnauthorized: an event from someone not authorized
	// was dropped.
	NotifyEventDroppedUnauthorized = "event-dropped-unauthorized"
)

// DaemonNotifyEvents are the events cli-config.yaml notifications.events
// may name, in the order loopd documents them.
var DaemonNotifyEvents = []string{NotifyWorkItemSpawned, NotifySessionDied, NotifyDispatchFailed, NotifyEventDroppedUnauthorized}

// Channels a daemon notification goes through.
const (
	// NotifyChannelSlack: the Slack integration (integrations.slack) or,
	// when only the Slack channel is configured (channels.slack), the work
	// item's thread there.
	NotifyChannelSlack = "slack"
	// NotifyChannelTicket: a marked comment on the work item, mentioning
	// the recipients' GitHub logins (never for dropped events: a stranger's
	// noise is not copied onto the ticket).
	NotifyChannelTicket = "ticket"
)

// NotifyChannels are the channels notifications.channels may name.
var NotifyChannels = []string{NotifyChannelSlack, NotifyChannelTicket}

// DaemonNotifications is cli-config.yaml's notifications and collaborators:
// which daemon events notify whom, and through what.
type DaemonNotifications struct {
	// Enabled is notifications.enabled (default true; nothing is sent
	// while Events is empty).
	Enabled bool
	// Events maps a daemon event (DaemonNotifyEvents) to the roles told.
	Events map[string][]string
	// Channels is notifications.channels (default [slack]).
	Channels []string
	// Collaborators are the operator's people (cli-config.yaml
	// collaborators): the roles' members.
	Collaborators Collaborators
}

// Recipients returns the roles event notifies and the collaborators
// holding one of them, in collaborators order (nil when disabled or none).
func (n DaemonNotifications) Recipients(event string) (roles []string, people []Collaborator) {
	if !n.Enabled {
		return nil, nil
	}
	roles = n.Events[event]
	for _, c := range n.Collaborators {
		if slices.ContainsFunc(roles, c.HasRole) {
			people = append(people, c)
		}
	}
	return roles, people
}

// Uses reports whether notifications go through channel.
func (n DaemonNotifications) Uses(channel string) bool { return slices.Contains(n.Channels, channel) }

// readDaemonNotifications reads cli-config.yaml's notifications and
// collaborators. A key theloop would not honour is refused, naming it and
// what it takes (conventions rule 22); so is a role no collaborator
// holds, which could never reach anyone — that one only warns.
func readDaemonNotifications(name string, notifications, collaborators any) (DaemonNotifications, []string, error) {
	n := DaemonNotifications{Enabled: true, Events: map[string][]string{}, Channels: []string{NotifyChannelSlack}}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, name, fmt.Sprintf(format, args...))
	}
	people, err := collaboratorList(name, collaborators)
	if err != nil {
		return n, nil, err
	}
	n.Collaborators = people
	if notifications == nil {
		return n, nil, nil
	}
	m, ok := notifications.(map[string]any)
	if !ok {
		return n, nil, bad("notifications: expected a mapping {enabled, events, channels}, got %s", typeName(notifications))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch k {
		case "enabled":
			b, ok := m[k].(bool)
			if !ok {
				return n, nil, bad("notifications.enabled: expected true or false, got %s", typeName(m[k]))
			}
			n.Enabled = b
		case "events":
			evs, ok := m[k].(map[string]any)
			if m[k] != nil && !ok {
				return n, nil, bad("notifications.events: expected a mapping of event → roles, e.g. {session-died: [operator]}, got %s", typeName(m[k]))
			}
			for _, ev := range slices.Sorted(maps.Keys(evs)) {
				if !slices.Contains(DaemonNotifyEvents, ev) {
					return n, nil, bad("notifications.events.%s: loopd raises %s (a repository's graph events, such as phase-approval-pending, are notified from its harness config)", ev, strings.Join(DaemonNotifyEvents, ", "))
				}
				roles, err := stringsOf(evs[ev])
				if err != nil {
					return n, nil, bad("notifications.events.%s: %v, e.g. [operator]", ev, err)
				}
				n.Events[ev] = roles
			}
		case "channels":
			chs, err := stringsOf(m[k])
			if err != nil {
				return n, nil, bad("notifications.channels: %v, e.g. [slack, ticket]", err)
			}
			for _, c := range chs {
				if !slices.Contains(NotifyChannels, c) {
					return n, nil, bad("notifications.channels: %q is not a channel; use %s", c, strings.Join(NotifyChannels, ", "))
				}
			}
			n.Channels = chs
		default:
			return n, nil, bad("notifications.%s: not a key; notifications holds enabled, events and channels", k)
		}
	}
	var warns []string
	for _, ev := range slices.Sorted(maps.Keys(n.Events)) {
		for _, role := range n.Events[ev] {
			if len(n.Collaborators.ByRole(role)) == 0 {
				warns = append(warns, fmt.Sprintf("%s: notifications.events.%s: no entry of collaborators holds the role %q; nobody is told", name, ev, role))
			}
		}
	}
	return n, warns, nil
}

// stringsOf reads a list of non-empty strings.
func stringsOf(v any) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("expected a list, got %s", typeName(v))
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok || strings.TrimSpace(s) == "" {
			return nil, fmt.Errorf("item %d is not a name", i)
		}
		out = append(out, strings.TrimSpace(s))
	}
	return out, nil
}
