package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/panewatch"
	"github.com/theloop-dev/theloop/internal/shortdir"
)

func TestParseScreen(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     [][]span
	}{
		{"plain", "hello\nworld", [][]span{{{"", "hello"}}, {{"", "world"}}}},
		{"basic colours", "\x1b[31mred\x1b[0m plain", [][]span{{{"f1", "red"}, {"", " plain"}}}},
		{"bright and bold", "\x1b[1;92mok\x1b[22m!", [][]span{{{"f10 bo", "ok"}, {"f10", "!"}}}},
		{"256 and truecolour", "\x1b[38;5;208ma\x1b[48;2;255;0;0mb", [][]span{{{"f208", "a"}, {"f208 b196", "b"}}}},
		{"colon form", "\x1b[38:2::0:0:255mx", [][]span{{{"f21", "x"}}}},
		{"reverse swaps", "\x1b[7;31mx", [][]span{{{"rv b1", "x"}}}},
		{"state carries over lines", "\x1b[4ma\nb\x1b[24mc", [][]span{{{"un", "a"}}, {{"un", "b"}, {"", "c"}}}},
		{"other escapes dropped", "a\x1b]8;;http://x\x07link\x1b]8;;\x1b\\b\x1b[2Kc\x07d", [][]span{{{"", "alinkbcd"}}}},
		{"empty line", "a\n\nb", [][]span{{{"", "a"}}, nil, {{"", "b"}}}},
		{"bad params ignored", "\x1b[38;5;999;;3mi", [][]span{{{"it", "i"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, parseScreen(tc.in))
		})
	}
}

// A span is [class, text] in JSON, and text that looks like markup stays
// escaped data.
func TestSpanJSON(t *testing.T) {
	b, err := json.Marshal([]span{{"f1", `<img src=x onerror=1>"\` + "\x01"}})
	require.NoError(t, err)
	var back [][2]string
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, `<img src=x onerror=1>"\`+"\x01", back[0][1])
	require.NotContains(t, string(b), "<img")
}

func FuzzParseScreen(f *testing.F) {
	for _, s := range []string{"", "\x1b[", "\x1b[38;5", "\x1b[38;2;1;2", "\x1b]8;;", "a\x1b", "\x1b[1;2;3;4;5;6;7m\xff\xfe", strings.Repeat("x", 3000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rows := parseScreen(s)
		require.LessOrEqual(t, len(rows), maxScreenRows)
		for _, r := range rows {
			n := 0
			for _, sp := range r {
				require.True(t, utf8.ValidString(sp.Text))
				n += utf8.RuneCountInString(sp.Text)
				require.NotContains(t, sp.Text, "\x1b")
				for _, c := range strings.Fields(sp.Class) {
					require.Regexp(t, `^(rv|bo|dm|it|un|[fb]\d{1,3})$`, c)
				}
			}
			require.LessOrEqual(t, n, maxRowRunes)
			_, err := json.Marshal(r)
			require.NoError(t, err)
		}
	})
}

// countingWriter is an http.ResponseWriter + Flusher that counts bytes.
type countingWriter struct {
	h http.Header
	n int
}

func (c *countingWriter) Header() http.Header         { return c.h }
func (c *countingWriter) Write(b []byte) (int, error) { c.n += len(b); return len(b), nil }
func (c *countingWriter) WriteHeader(int)             {}
func (c *countingWriter) Flush()                      {}

// BenchmarkBusyPaneBytesPerViewer measures what one viewer of a busy
// pane receives: a real tmux session printing as fast as it can, watched
// for two seconds through the same Watch and frame encoding the page
// uses. Reported: bytes/s per viewer (the cap is PaneBytesPerSecond) and
// frames/s.
func BenchmarkBusyPaneBytesPerViewer(b *testing.B) {
	if _, err := exec.LookPath("tmux"); err != nil {
		b.Skip("tmux is not installed")
	}
	sock := shortdir.Tmux(b)
	tm := func(args ...string) {
		out, err := exec.Command("tmux", append([]string{"-S", sock}, args...)...).CombinedOutput()
		require.NoError(b, err, "%s", out)
	}
	tm("-f", "/dev/null", "new-session", "-d", "-s", "busy", "-x", "200", "-y", "50",
		`while :; do printf '\033[3%dm%s %s\033[0m\n' $((RANDOM%8)) "$(date +%s.%N)" "building module $RANDOM of the agent's busy output"; done`)
	b.Cleanup(func() { _ = exec.Command("tmux", "-S", sock, "kill-server").Run() })
	capture := func(ctx context.Context) (string, error) {
		out, err := exec.CommandContext(ctx, "tmux", "-S", sock, "capture-pane", "-e", "-p", "-t", "=busy:").Output()
		return string(out), err
	}
	var total, frames int
	var secs float64
	for b.Loop() {
		w := &countingWriter{h: http.Header{}}
		v := &countingViewer{paneViewer: paneViewer{w: w, fl: w}}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		start := time.Now()
		_ = panewatch.Watch(ctx, panewatch.Config{BytesPerSecond: PaneBytesPerSecond}, capture, v)
		secs += time.Since(start).Seconds()
		cancel()
		total += w.n
		frames += v.frames
	}
	b.ReportMetric(float64(total)/secs, "bytes/s/viewer")
	b.ReportMetric(float64(frames)/secs, "frames/s")
}

type countingViewer struct {
	paneViewer
	frames int
}

func (c *countingViewer) Frame(s string) (int, error) {
	c.frames++
	return c.paneViewer.Frame(s)
}
