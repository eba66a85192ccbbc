package main

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var sgr = regexp.MustCompile("\x1b\\[[0-9;]*m")

// A coloured table is the plain table plus escapes: stripping them gives
// the same bytes, so every column stays aligned; the header is bold and
// status cells are painted.
func TestTableColourKeepsColumnsAligned(t *testing.T) {
	render := func(on bool) string {
		var b bytes.Buffer
		tw := newTable(&b, on)
		tw.head("\tNODE\tSTATUS\tDETAIL", 2)
		tw.row("%s\t%s\t%s\t%s\n", "▶", "design", paint(on, "block"), "missing ## Scope")
		tw.row("%s\t%s\t%s\t%s\n", "", "requirements-definition", paint(on, "pass"), "")
		tw.row("\t\t%s\t%s\n", paint(on, ""), "a second message")
		tw.head("\nLOCKED ARTIFACT\tVERDICT", 1)
		tw.row("%s\t%s\n", "docs/specs/issue-1/design.md", paint(on, "verified"))
		require.NoError(t, tw.flush())
		return b.String()
	}
	plain, coloured := render(false), render(true)
	require.NotContains(t, plain, "\x1b[")
	require.Equal(t, plain, sgr.ReplaceAllString(coloured, ""), "the same table once the escapes are gone")
	require.True(t, strings.HasPrefix(coloured, sgrBold), "the header is bold")
	require.Contains(t, coloured, sgrRed+"block"+sgrReset)
	require.Contains(t, coloured, sgrGreen+"verified"+sgrReset)
	require.Contains(t, coloured, "\n\n"+sgrBold+"LOCKED ARTIFACT", "a header after a blank line is bold too")
}

// Every table verb: colour on a terminal, none with NO_COLOR, none when
// piped; the coloured output is the plain one plus escapes.
func TestTablesColourOnlyOnATerminal(t *testing.T) {
	repo := newRepo(t)
	for _, argv := range [][]string{
		{"graph", "hooks"},
		{"graph", "skip", "issue-42", "--list"},
		{"config", "show"},
		{"check", "issue-42", "--recompute"},
	} {
		t.Run(strings.Join(argv, " "), func(t *testing.T) {
			f, out := testFactory(t, repo, nil)
			base := f.Getenv
			run := func(tty bool, env map[string]string) string {
				out.out.Reset()
				f.Getenv = func(k string) string {
					if v, ok := env[k]; ok {
						return v
					}
					return base(k)
				}
				f.IsTerminal = func(io.Writer) bool { return tty }
				code := Main(append([]string{"loopctl"}, argv...), f)
				require.Contains(t, []int{exitOK, exitFailed}, code, out.err.String())
				return out.out.String()
			}
			piped := run(false, nil)
			require.NotContains(t, piped, "\x1b[", "piped: no colour")
			require.NotContains(t, run(true, map[string]string{"NO_COLOR": "1"}), "\x1b[", "NO_COLOR: no colour")
			require.NotContains(t, run(true, map[string]string{"TERM": "dumb"}), "\x1b[")
			tty := run(true, nil)
			require.Contains(t, tty, sgrBold, "a terminal: the header is bold")
			require.Equal(t, piped, sgr.ReplaceAllString(tty, ""), "aligned alike")
			if argv[0] == "check" {
				require.Contains(t, piped, "STATUS")
				require.Regexp(t, "\x1b\\[3[29]mpending\x1b\\[0m|\x1b\\[3[1-3]m[a-z]+\x1b\\[0m", tty, "status cells are painted")
			}
			require.Contains(t, run(false, map[string]string{"CLICOLOR_FORCE": "1"}), sgrBold, "forced into a pipe")
		})
	}
}
