package loop_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop"
)

// cli-config.yaml's notifications and collaborators are read into one
// typed value, and every key theloop would not honour is refused with its
// name and what it takes.
func TestDaemonNotificationsConfig(t *testing.T) {
	cfg, err := loop.ParseCLIConfig("cli-config.yaml", []byte(`version: "`+loop.CurrentCLIConfigVersion+`"
collaborators:
  - {login: dana, roles: [operator], slack: UDANA}
  - {login: eve, roles: [auditor]}
notifications:
  events:
    session-died: [operator]
    dispatch-failed: [operator, auditor]
  channels: [slack, ticket]
`))
	require.NoError(t, err)
	st := cfg.Settings
	n := st.Notifications
	require.True(t, n.Enabled)
	require.True(t, n.Uses(loop.NotifyChannelTicket))
	roles, people := n.Recipients(loop.NotifySessionDied)
	require.Equal(t, []string{"operator"}, roles)
	require.Len(t, people, 1)
	require.Equal(t, "dana", people[0].Login)
	_, people = n.Recipients(loop.NotifyDispatchFailed)
	require.Len(t, people, 2)
	roles, _ = n.Recipients(loop.NotifyWorkItemSpawned)
	require.Empty(t, roles)

	for _, tc := range []struct{ yaml, want string }{
		{"notifications:\n  events:\n    phase-approval-pending: [approver]\n", "notifications.events.phase-approval-pending: loopd raises work-item-spawned, session-died, dispatch-failed, event-dropped-unauthorized"},
		{"notifications:\n  channels: [email]\n", `notifications.channels: "email" is not a channel; use slack, ticket`},
		{"notifications:\n  enable: true\n", "notifications.enable: not a key"},
		{"notifications:\n  events: {session-died: operator}\n", "notifications.events.session-died: expected a list"},
		{"collaborators:\n  - {login: 'dana smith'}\n", "collaborators[0].login"},
	} {
		_, err := loop.ParseCLIConfig("cli-config.yaml", []byte("version: \""+loop.CurrentCLIConfigVersion+"\"\n"+tc.yaml))
		require.ErrorIs(t, err, loop.ErrInvalidConfig, tc.yaml)
		require.Contains(t, err.Error(), tc.want)
	}

	cfg, err = loop.ParseCLIConfig("cli-config.yaml", []byte("version: \""+loop.CurrentCLIConfigVersion+"\"\nnotifications:\n  events: {session-died: [pager]}\n"))
	require.NoError(t, err)
	require.Contains(t, cfg.Warnings, "cli-config.yaml: notifications.events.session-died: no entry of collaborators holds the role \"pager\"; nobody is told")
}
