package loop

import "github.com/theloop-dev/theloop/internal/scrub"

// CredentialScrub is the cleaner loopctl passes as Scrub: the current
// values of the variables theloop reads credentials from (GH_TOKEN,
// THE_LOOP_SERVICE_TOKEN, …, read through lookup) and text shaped like a
// well-known token become "[redacted]" (docs/daemon.md §11.6). Strings
// inside maps and lists are cleaned; other values pass unchanged.
func CredentialScrub(lookup func(string) (string, bool)) func(any) any {
	return scrub.FromEnv(lookup).Value
}
