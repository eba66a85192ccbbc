package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/cli/go-gh/v2/pkg/term"
)

// Colour on a terminal, none when piped or redirected, none with NO_COLOR
// (https://no-color.org) or CLICOLOR=0 or TERM=dumb; CLICOLOR_FORCE (not
// "0") forces it, as gh does.

// colourFor reports whether output to w is coloured.
func colourFor(w io.Writer, getenv func(string) string) bool {
	return colourWanted(isStdoutTerminal(w), getenv)
}

func isStdoutTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && f == os.Stdout && term.FromEnv().IsTerminalOutput()
}

// colour reports whether output to w is coloured, by the factory's
// terminal check (Factory.IsTerminal; the real one when nil) and its
// environment.
func (f *Factory) colour(w io.Writer) bool {
	tty := false
	if f.IsTerminal != nil {
		tty = f.IsTerminal(w)
	} else {
		tty = isStdoutTerminal(w)
	}
	return colourWanted(tty, f.Getenv)
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
	// A table's header line starts bold and every other line starts
	// normal: the same length, so its first column stays aligned.
	sgrBold   = "\x1b[01m"
	sgrNormal = "\x1b[22m"
	// sgrBoldAgain is as long as sgrReset.
	sgrBoldAgain = "\x1b[1m"
)

// table is every table loopctl prints: a tabwriter whose header line is
// bold on a colour terminal. Cells stay as given; status words are painted
// by the caller (paint), every cell of a column alike.
type table struct {
	tw *tabwriter.Writer
	on bool
}

func newTable(w io.Writer, on bool) *table {
	return &table{tw: tabwriter.NewWriter(w, 2, 4, 2, ' ', 0), on: on}
}

// head writes the header line (cells separated by tabs; leading newlines
// are written as they are, outside the bold). painted lists the columns
// (from 0) whose cells the rows paint: their header cells carry escapes of
// the same length as a painted cell's, so the column stays aligned.
func (t *table) head(cells string, painted ...int) {
	lead := cells[:len(cells)-len(strings.TrimLeft(cells, "\n"))]
	cells = cells[len(lead):]
	if t.on {
		cols := strings.Split(cells, "\t")
		for _, i := range painted {
			if i >= 0 && i < len(cols) {
				// Plain colour, then bold again: as long as a painted
				// cell's colour and reset.
				cols[i] = sgrPlain + cols[i] + sgrBoldAgain
			}
		}
		cells = sgrBold + strings.Join(cols, "\t") + sgrReset
	}
	fmt.Fprint(t.tw, lead+cells+"\n")
}

// row writes one line (format ends with its newline).
func (t *table) row(format string, args ...any) {
	if t.on {
		format = sgrNormal + format
	}
	fmt.Fprintf(t.tw, format, args...)
}

func (t *table) flush() error { return t.tw.Flush() }

// paint colours a status word: pass/ok/active green, block/FAIL red,
// wait/paused yellow, anything else plain — every cell wrapped alike.
func paint(on bool, s string) string {
	if !on {
		return s
	}
	c := sgrPlain
	switch s {
	case "pass", "ok", "active", "passed", "verified":
		c = sgrGreen
	case "block", "FAIL", "NOT ok", "blocked", "refused", "error", "dead", "failed":
		c = sgrRed
	case "wait", "paused", "waiting", "warning", "unverified", "stopped":
		c = sgrYellow
	}
	return c + s + sgrReset
}
