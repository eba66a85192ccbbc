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
