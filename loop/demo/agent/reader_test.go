package agent

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReaderSubmitsOnEnterOutsideAPaste(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []string
		want   []string
		echo   string
	}{
		{
			name:   "a bracketed multi-line paste, then Enter (what tmux paste-buffer -p sends)",
			chunks: []string{"\x1b[200~the-loop assignment for issue-1:\r  you are now at node: design\x1b[201~", "\r"},
			want:   []string{"the-loop assignment for issue-1:\n  you are now at node: design"},
			echo:   "│ the-loop assignment for issue-1:\n│   you are now at node: design\n",
		},
		{
			name:   "markers split across reads",
			chunks: []string{"\x1b", "[20", "0~a\rb\x1b[2", "01", "~", "\r"},
			want:   []string{"a\nb"},
		},
		{
			name:   "Enter inside a paste does not submit",
			chunks: []string{"\x1b[200~one\r\rtwo\r\x1b[201~"},
			want:   nil,
		},
		{
			name:   "typed text with a backspace",
			chunks: []string{"hellp\x7fo\r"},
			want:   []string{"hello"},
			echo:   "hellp\b \bo\n",
		},
		{
			name:   "two messages in one read, blank Enter ignored",
			chunks: []string{"\r\x1b[200~x\x1b[201~\r\x1b[200~y\x1b[201~\n"},
			want:   []string{"x", "y"},
		},
		{
			name:   "other escape sequences (arrows, focus) are ignored",
			chunks: []string{"\x1b[A\x1b[Ia\x1bOb\r"},
			want:   []string{"ab"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var echo bytes.Buffer
			r := &Reader{Echo: &echo}
			var got []string
			for _, c := range tc.chunks {
				got = append(got, r.Feed([]byte(c))...)
			}
			require.Equal(t, tc.want, got)
			if tc.echo != "" {
				require.Equal(t, tc.echo, echo.String())
			}
		})
	}
}

func TestReaderBoundsAMessage(t *testing.T) {
	r := &Reader{}
	big := "\x1b[200~" + strings.Repeat("x", maxMessage+100) + "\x1b[201~\r"
	got := r.Feed([]byte(big))
	require.Len(t, got, 1)
	require.Len(t, got[0], maxMessage)
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("\x1b[200~a\rb\x1b[201~\r"), 3)
	f.Add([]byte("\x1b[\x1b[200~\x7f\x7f\r\n\x1b"), 1)
	f.Add([]byte("\xff\xfe\x1b[99999999999999999~x\r"), 2)
	f.Fuzz(func(t *testing.T, in []byte, split int) {
		r := &Reader{Echo: &bytes.Buffer{}}
		if split <= 0 {
			split = 1
		}
		for len(in) > 0 {
			n := min(split, len(in))
			for _, m := range r.Feed(in[:n]) {
				if m == "" || m != strings.TrimSpace(m) {
					t.Fatalf("message %q is empty or untrimmed", m)
				}
			}
			in = in[n:]
		}
	})
}
