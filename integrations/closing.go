package integrations

import (
	"strconv"
	"strings"

	"github.com/theloop-dev/theloop/internal/lazyre"
	"github.com/theloop-dev/theloop/workitem"
)

// closingKeywordRE matches GitHub's closing keywords followed by an issue
// reference: "Fixes #12", "closes: owner/repo#3", "Resolved
// https://github.com/owner/repo/issues/9". GitHub wants one keyword per
// issue, and so do we.
var closingKeywordRE = lazyre.New(`(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b:?[ \t]+(?:([A-Za-z0-9._-]+)/([A-Za-z0-9._-]+)#(\d+)|#(\d+)|https?://([A-Za-z0-9.:-]+)/([A-Za-z0-9._-]+)/([A-Za-z0-9._-]+)/issues/(\d+))\b`)

// parseClosingKeywords returns the issues body says it closes, in order of
// first mention, without duplicates. A bare "#n" names an issue of
// owner/repo; a URL counts only when it is on webHost (the host the pull
// request lives on, "github.com" by default), because a closing keyword
// cannot close an issue on another host.
func parseClosingKeywords(body, owner, repo, webHost string) []closingRef {
	if webHost == "" {
		webHost = workitem.DefaultGitHubHost
	}
	seen := map[closingRef]bool{}
	var out []closingRef
	add := func(o, r, num string) {
		n, err := strconv.Atoi(num)
		if err != nil || n <= 0 || n > workitem.MaxNumber || !workitem.ValidName(o) || !workitem.ValidName(r) {
			return
		}
		c := closingRef{Owner: o, Repo: r, Number: n}
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	for _, m := range closingKeywordRE.FindAllStringSubmatch(body, -1) {
		switch {
		case m[3] != "":
			add(m[1], m[2], m[3])
		case m[4] != "":
			add(owner, repo, m[4])
		case m[8] != "":
			if strings.EqualFold(m[5], webHost) {
				add(m[6], m[7], m[8])
			}
		}
	}
	return out
}
