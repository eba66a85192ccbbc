package sessions

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/theloop-dev/theloop/internal/atomicfile"
)

// The Gemini CLI loads a project's .gemini/settings.json — and with it the
// AfterAgent hook that runs loop-gate — only for a folder it trusts, and it
// decides that before --skip-trust takes effect: under --skip-trust alone a
// project-scope gate never runs. So a session's checkout is marked trusted
// in Gemini's own trusted-folders file before the CLI starts.

// geminiTrustFolder is the trust level Gemini gives one folder (not its
// parent).
const geminiTrustFolder = "TRUST_FOLDER"

// maxTrustedFoldersFile bounds what PrepareEnvironment reads of the file.
const maxTrustedFoldersFile = 1 << 20

// GeminiTrustedFoldersFile is the file the Gemini CLI reads folder trust
// from, resolved as the CLI does: $GEMINI_CLI_TRUSTED_FOLDERS_PATH, else
// <$GEMINI_CLI_HOME or home>/.gemini/trustedFolders.json. "" when there is
// no home to resolve against.
func GeminiTrustedFoldersFile(getenv func(string) string, home string) string {
	if p := getenv("GEMINI_CLI_TRUSTED_FOLDERS_PATH"); filepath.IsAbs(p) {
		return p
	}
	if h := getenv("GEMINI_CLI_HOME"); filepath.IsAbs(h) {
		home = h
	}
	if !filepath.IsAbs(home) {
		return ""
	}
	return filepath.Join(home, ".gemini", "trustedFolders.json")
}

// trustGeminiFolder records dir as TRUST_FOLDER in the trusted-folders file
// at path, keeping every other entry. An entry the operator set for dir
// (DO_NOT_TRUST included) is left alone and reported as a warning.
func trustGeminiFolder(path, dir string) (Prepared, error) {
	var p Prepared
	folders := map[string]any{}
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return p, fmt.Errorf("gemini trusted folders: %w", err)
	default:
		dec := json.NewDecoder(&limitedReader{f: f, n: maxTrustedFoldersFile})
		derr := dec.Decode(&folders)
		f.Close()
		if derr != nil {
			return p, fmt.Errorf("gemini trusted folders %s: not a JSON object (%v); fix or remove it", path, derr)
		}
	}
	if cur, ok := folders[dir]; ok {
		if cur != geminiTrustFolder {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s marks %s as %v; left as the operator set it: Gemini will not load the project's hooks (the gate) there", path, dir, cur))
		}
		return p, nil
	}
	folders[dir] = geminiTrustFolder
	b, err := json.MarshalIndent(folders, "", "  ")
	if err != nil {
		return p, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return p, fmt.Errorf("gemini trusted folders: %w", err)
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o600); err != nil {
		return p, fmt.Errorf("gemini trusted folders: %w", err)
	}
	p.Changed = append(p.Changed, path)
	p.Trusted = append(p.Trusted, dir)
	return p, nil
}

// limitedReader fails past n bytes instead of truncating silently.
type limitedReader struct {
	f *os.File
	n int64
}

func (l *limitedReader) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("larger than %d bytes", maxTrustedFoldersFile)
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.f.Read(b)
	l.n -= int64(n)
	return n, err
}
