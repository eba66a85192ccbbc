package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The service verbs map flags into options and hand them to runF, like
// every other verb; the refusals happen before anything is asked of loopd.
func TestServiceVerbsParseFlags(t *testing.T) {
	for _, tc := range []struct {
		argv  []string
		code  int
		verb  string
		seq   uint64
		sock  string
		forms string
	}{
		{[]string{"daemon", "status", "--socket", "/s.sock", "--format", "json"}, 0, "status", 0, "/s.sock", "json"},
		{[]string{"daemon", "status", "extra"}, exitRefused, "", 0, "", ""},
		{[]string{"daemon", "status", "--format", "yaml"}, exitRefused, "", 0, "", ""},
		{[]string{"queue", "status"}, 0, "status", 0, "", "table"},
		{[]string{"queue", "dead", "--socket", "/q.sock"}, 0, "dead", 0, "/q.sock", "table"},
		{[]string{"queue", "replay", "7"}, 0, "replay", 7, "", "table"},
		{[]string{"queue", "replay", "0"}, exitRefused, "", 0, "", ""},
		{[]string{"queue", "replay"}, exitRefused, "", 0, "", ""},
		{[]string{"queue", "dead", "x"}, exitRefused, "", 0, "", ""},
	} {
		t.Run(strings.Join(tc.argv, " "), func(t *testing.T) {
			f, io := testFactory(t, t.TempDir(), nil)
			var gotVerb, gotSock, gotFormat string
			var gotSeq uint64
			called := false
			app := newApp(f)
			for i, c := range app.Commands {
				switch c.Name {
				case "daemon":
					app.Commands[i] = newDaemonCmd(f, func(_ context.Context, o *daemonStatusOptions) error {
						called, gotVerb, gotSock, gotFormat = true, "status", o.Service.Socket, o.Service.Format
						return nil
					})
				case "queue":
					app.Commands[i] = newQueueCmd(f, func(_ context.Context, o *queueOptions) error {
						called, gotVerb, gotSeq, gotSock, gotFormat = true, o.Verb, o.Seq, o.Service.Socket, o.Service.Format
						return nil
					})
				}
			}
			code := mainWith(app, append([]string{"loopctl"}, tc.argv...), f)
			require.Equal(t, tc.code, code, io.err.String())
			if tc.code != 0 {
				require.False(t, called, "nothing runs after a refusal")
				require.NotEmpty(t, io.err.String(), "a refusal says why")
				return
			}
			require.True(t, called)
			require.Equal(t, tc.verb, gotVerb)
			require.Equal(t, tc.seq, gotSeq)
			require.Equal(t, tc.sock, gotSock)
			require.Equal(t, tc.forms, gotFormat)
		})
	}
}
