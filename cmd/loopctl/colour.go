package main

import (
	"io"
	"os"

	"github.com/cli/go-gh/v2/pkg/term"
)

// Colour on a terminal, none when piped or redirected, none with NO_COLOR
// (https://no-color.org) or CLICOLOR=0 or TERM=dumb; CLICOLOR_FORCE (not
// "0") forces it, as gh does.

// colourFor reports whether output to w is coloured.
func colourFor(w io.Writer, getenv func(string) string) bool {
	f, ok := w.(*os.File)
	tty := ok && f == os.Stdout && term.FromEnv().IsTerminalOutput()
	return colourWanted(tty, getenv)
}

func colourWanted(tty bool, getenv func(string) string) bool {
	if v := getenv("CLICOLOR_FORCE"); v != "" && v != "0" {
		return true
	}
	if getenv("NO_COLOR") != "" || getenv("CLICOLOR") == "0" || getenv("TERM") == "dumb" {
		return false
	}
	return tty
}

// SGR codes of equal length, so a tabwriter column of painted cells stays
// aligned (it counts the escape bytes alike in every row).
const (
	sgrGreen  = "\x1b[32m"
	sgrRed    = "\x1b[31m"
	sgrYellow = "\x1b[33m"
	sgrPlain  = "\x1b[39m"
	sgrReset  = "\x1b[0m"
)

// paint colours a status word: pass/ok/active green, block/FAIL red,
// wait/paused yellow, anything else plain — every cell wrapped alike.
func paint(on bool, s string) string {
	if !on {
		return s
	}
	c := sgrPlain
	switch s {
	case "pass", "ok", "active", "passed":
		c = sgrGreen
	case "block", "FAIL", "NOT ok", "blocked":
		c = sgrRed
	case "wait", "paused", "waiting":
		c = sgrYellow
	}
	return c + s + sgrReset
}
