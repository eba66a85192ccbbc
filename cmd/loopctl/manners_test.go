package main

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// leaves walks every leaf verb (a visible command without subcommands).
func leaves(cmds []*cli.Command, prefix string, fn func(name string, c *cli.Command)) {
	for _, c := range cmds {
		name := strings.TrimSpace(prefix + " " + c.Name)
		if len(c.Subcommands) > 0 {
			leaves(c.Subcommands, name, fn)
			continue
		}
		if c.Hidden {
			continue
		}
		fn(name, c)
	}
}

// Every verb that prints JSON takes --jq and --template.
func TestJSONVerbsTakeJQAndTemplate(t *testing.T) {
	f, _ := testFactory(t, t.TempDir(), nil)
	leaves(newApp(f).Commands, "", func(name string, c *cli.Command) {
		has := map[string]bool{}
		for _, fl := range c.Flags {
			for _, n := range fl.Names() {
				has[n] = true
			}
		}
		// keys show's formats are key, env and file: no JSON.
		if has["format"] && name != "keys show" && (!has["jq"] || !has["template"]) {
			t.Errorf("loopctl %s prints JSON (--format) but lacks --jq/--template", name)
		}
	})
}

// Every leaf verb's --help shows an example.
func TestLeafVerbsShowAnExample(t *testing.T) {
	f, _ := testFactory(t, t.TempDir(), nil)
	var missing []string
	leaves(newApp(f).Commands, "", func(name string, c *cli.Command) {
		if !strings.Contains(c.Description+c.UsageText, "loopctl ") {
			missing = append(missing, name)
		}
	})
	if len(missing) > 0 {
		t.Errorf("leaf verbs without an example in --help (%d): %s", len(missing), strings.Join(missing, ", "))
	}
}

// Colour only on a terminal, never with NO_COLOR, CLICOLOR=0 or TERM=dumb;
// CLICOLOR_FORCE forces it. Painted cells are all wrapped alike, so a
// table's column stays aligned.
func TestColour(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name string
		tty  bool
		env  func(string) string
		want bool
	}{
		{"terminal", true, env(), true},
		{"piped", false, env(), false},
		{"NO_COLOR", true, env("NO_COLOR", "1"), false},
		{"CLICOLOR=0", true, env("CLICOLOR", "0"), false},
		{"dumb terminal", true, env("TERM", "dumb"), false},
		{"forced into a pipe", false, env("CLICOLOR_FORCE", "1"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := colourWanted(tc.tty, tc.env); got != tc.want {
				t.Fatalf("colourWanted = %v, want %v", got, tc.want)
			}
		})
	}
	if paint(false, "block") != "block" {
		t.Fatal("no colour: the word alone")
	}
	a, b := paint(true, "block"), paint(true, "skip")
	if len(a)-len("block") != len(b)-len("skip") || !strings.HasPrefix(a, "\x1b[31m") {
		t.Fatalf("painted cells differ in escape length: %q %q", a, b)
	}
}
