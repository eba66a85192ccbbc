package daemon

import (
	"fmt"
	"os"
	"os/user"
	"strconv"

	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
)

// procRoot is where the sandbox ancestry check reads processes.
const procRoot = "/proc"

// socketPeer is the control socket's apiserver.PeerPolicy: who a peer is, or why
// it may not use the control plane. The socket's 0600 mode admits every
// process of loopd's OS user — and the agent runs as that user — so mode
// alone is no proof of an operator:
//   - a peer inside an agent session (below a sandbox launcher, see
//     package sandbox) is refused on the whole socket, reads included:
//     nothing in a session needs the control plane (loop-gate, `loopctl
//     check`, `graph complete` and `loopctl mcp` run in-process), and the
//     reads name other sessions and their attach commands. A process whose
//     ancestry cannot be read is refused (fail closed);
//   - a peer of another OS user is refused, root excepted (root could
//     read the state root anyway);
//   - an admitted peer of loopd's own user is the operator: recorded as
//     "github:<login>" when the dashboard's operator login is configured
//     (Config.Dashboard.Operator, the person who runs this loopd), else as
//     "os-user:<name>"; root and other admitted users as "os-user:<name>".
//
// The answer is taken once per connection, at accept time.
func socketPeer(operator string) apiserver.PeerPolicy {
	return func(p apiserver.Peer) (string, error) { return peerIdentity(operator, p) }
}

func peerIdentity(operator string, p apiserver.Peer) (string, error) {
	self := os.Getuid()
	if p.UID != self && p.UID != 0 {
		return "", fmt.Errorf("process %d runs as uid %d, not loopd's user (uid %d); only loopd's user (or root) may use its control socket", p.PID, p.UID, self)
	}
	in, err := sandbox.InSandbox(procRoot, p.PID)
	if err != nil {
		return "", fmt.Errorf("could not tell whether process %d is inside an agent session (%v); refused", p.PID, err)
	}
	if in {
		return "", fmt.Errorf("process %d is inside an agent session (it descends from a sandbox launcher); the control plane is for the operator's own shell, not for the agent", p.PID)
	}
	if p.UID == self && operator != "" {
		return "github:" + operator, nil
	}
	return osUserIdentity(p.UID), nil
}

// osUserIdentity is "os-user:<name>" ("os-user:uid-<n>" when the user
// database has no name for the uid).
func osUserIdentity(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return "os-user:" + u.Username
	}
	return "os-user:uid-" + strconv.Itoa(uid)
}
