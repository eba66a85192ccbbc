package loop

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every catalogued key has exactly one reader and every reader reads a
// catalogued key (docs/decisions.md §20): a key accepted and shown but
// read by nothing cannot come back, nor a reader of a key the operator
// cannot write. Objects are containers (no reader, unless their members
// are open, as routing.control.keywords'); a list's item keys are read by
// the list's reader.
func TestEveryCatalogueKeyHasExactlyOneReader(t *testing.T) {
	idx := keyIndex()
	for _, k := range configKeys {
		t.Run(k.Path, func(t *testing.T) {
			_, has := settingReaderIndex[k.Path]
			switch {
			case strings.Contains(k.Path, "[]"):
				list := k.Path[:strings.Index(k.Path, "[]")]
				require.Contains(t, settingReaderIndex, list, "%s is read by its list's reader", k.Path)
				require.False(t, has)
			case k.Type == "object" && k.Path != "routing.control.keywords":
				require.False(t, has, "an object is a container; its members have the readers")
			default:
				require.True(t, has, "%s is catalogued but nothing reads it: register a reader in settingReaders or retire it (removedKeyList)", k.Path)
			}
		})
	}
	n := 0
	for _, r := range settingReaders {
		_, ok := idx[r.path]
		require.True(t, ok, "reader of %s: the key is not in the catalogue", r.path)
		n++
	}
	require.Len(t, settingReaderIndex, n, "one reader per key")
	for path := range removedKeys {
		_, ok := idx[path]
		require.False(t, ok, "%s is both catalogued and retired", path)
	}
	require.Panics(t, func() {
		m := map[string]bool{}
		for _, r := range append(settingReaders, settingReaders[0]) {
			if m[r.path] {
				panic("dup")
			}
			m[r.path] = true
		}
	})
}

// Every reader records what it used: Shown has a row for each leaf key
// (lists and open objects included) even for an empty file, with the
// catalogue's default where the key has one.
func TestShownCoversEveryReadKeyWithTheCatalogueDefault(t *testing.T) {
	st, problems, err := readSettings("", map[string]any{})
	require.NoError(t, err)
	require.Empty(t, problems)
	for _, k := range configKeys {
		if _, ok := settingReaderIndex[k.Path]; !ok {
			continue
		}
		row, ok := st.ShownValue(k.Path)
		if k.Default == nil {
			continue
		}
		require.True(t, ok, k.Path)
		require.Equal(t, SourceDefault, row.Source, k.Path)
		require.Equal(t, k.Default, row.Value, k.Path)
	}
}

// A removed key is refused at load, naming the nearest valid key and
// `loopctl config migrate`; migrate removes it and says so.
func TestRemovedKeysAreRefusedAndMigratedAway(t *testing.T) {
	for _, tc := range []struct{ yaml, key, nearest string }{
		{"routing:\n  workspace: {root: /w, cloneProtocol: ssh}\n", "routing.workspace.cloneProtocol", ""},
		{"channels:\n  slack: {channel: '#x', read: {mode: poll}}\n", "channels.slack.read", ""},
		{"standingSessions: []\n", "standingSessions", ""},
		{"selfDiagnosis: {enabled: true}\n", "selfDiagnosis", ""},
		{"polling:\n  sources:\n    - {provider: github, repos: [o/r], ghBinary: gh}\n", "polling.sources[].ghBinary", ""},
		{"service:\n  port: 8080\n", "service.port", "webhooks.ghWebhook.port"},
		{"routing:\n  harnessPlugins: {marketplaceRepo: x}\n", "routing.harnessPlugins.marketplaceRepo", ""},
	} {
		t.Run(tc.key, func(t *testing.T) {
			_, err := ParseCLIConfig("c.yaml", []byte(tc.yaml))
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.ErrorContains(t, err, tc.key+" is no longer accepted")
			require.ErrorContains(t, err, "`loopctl config migrate` removes it")
			if tc.nearest != "" {
				require.ErrorContains(t, err, "nearest valid key is "+tc.nearest)
			}
			m, err := MigrateCLIConfig("c.yaml", []byte(tc.yaml))
			require.NoError(t, err)
			var said []string
			for _, c := range m.Changes {
				said = append(said, c.String())
			}
			require.Contains(t, strings.Join(said, "\n"), "removed "+tc.key)
			_, err = ParseCLIConfig("c.yaml", m.Output)
			require.NoError(t, err, "the migrated file loads:\n%s", m.Output)
		})
	}
}

func TestHarnessByRepository(t *testing.T) {
	st, problems, err := readSettings("cli-config.yaml", map[string]any{"routing": map[string]any{"harnessByRepository": map[string]any{
		"Octo/Widgets": "codex", "octo/site": "gemini",
	}}})
	require.NoError(t, err)
	require.Empty(t, problems)
	require.Equal(t, map[string]string{"octo/widgets": "codex", "octo/site": "gemini"}, st.Routing.HarnessByRepository)

	_, problems, _ = readSettings("cli-config.yaml", map[string]any{"routing": map[string]any{"harnessByRepository": map[string]any{
		"octo": "codex", "octo/x": "aider", "octo/y": 3,
	}}})
	require.Equal(t, []string{
		`routing.harnessByRepository: "octo" is not owner/repo`,
		"routing.harnessByRepository.octo/x: aider is not a harness (claude, cursor, codex, gemini)",
		"routing.harnessByRepository.octo/y: 3 is not a harness (claude, cursor, codex, gemini)",
	}, problems)
	_, problems, _ = readSettings("cli-config.yaml", map[string]any{"routing": map[string]any{"harnessByRepository": "codex"}})
	require.Equal(t, []string{"routing.harnessByRepository: expected a mapping of owner/repo to a harness, got a string"}, problems)
}
