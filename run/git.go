package run

// gitPins are the `-c` settings every git loopd runs gets, one for each
// configuration key that makes git run a program (git-config(1), checked
// against git 2.39), so that a value planted in a repository's
// configuration — or a file it includes — runs nothing: command-line
// settings come after every file, and the last value of a key wins.
//
// Keys that cannot be pinned this way, and what covers them instead:
//   - include.path / includeIf.*.path: includes are followed only from
//     files (an empty include.path on the command line is an error), so a
//     repository's includes are read; every key they could set is pinned
//     here, and system and global configuration are off (GitEnv).
//   - filter.<driver>.{clean,smudge,process}, diff.<driver>.{command,
//     textconv}, merge.<driver>.driver: the driver names are open-ended.
//     Attributes from the system and core.attributesFile are off
//     (GIT_ATTR_NOSYSTEM, core.attributesFile=/dev/null); a tree's own
//     .gitattributes and .git/info/attributes can only name a driver that
//     configuration defines. The rule that closes it: loopd never runs git
//     in a repository or work tree an agent can write (docs/decisions.md
//     §22); diffs add --no-ext-diff --no-textconv.
//   - pager.<cmd>: --no-pager (GitArgs) turns every pager off.
//   - alias.*: an alias never shadows a built-in command, and loopd runs
//     built-ins only.
//   - remote.<name>.{uploadpack,receivepack,vcs} for a name other than
//     origin, url.<base>.insteadOf: loopd fetches by URL with
//     --upload-pack=git-upload-pack, in a mirror no agent can write.
//   - uploadpack.packObjectsHook, trace2.*, safe.directory: honoured only
//     from protected (system, global, command-line) configuration, which
//     loopd owns.
//   - submodule.<name>.update=!cmd: loopd never updates submodules, and
//     fetches with fetch.recurseSubmodules=false.
//   - difftool/mergetool/sendemail/imap/web.browser/tar.*.command: only the
//     porcelain commands loopd never runs read them.
var gitPins = [...]string{
	"core.fsmonitor=false",                 // a program run on every index refresh
	"core.sshCommand=ssh -o BatchMode=yes", // the ssh transport's program (never a prompt)
	"core.gitProxy=none",                   // the git:// transport's proxy program (git:// is refused anyway)
	"core.askPass=",                        // empty: no askpass program for credentials
	"core.pager=cat",                       // with --no-pager, belt and braces
	"core.editor=true",                     // commit/tag/rebase message editor
	"sequence.editor=true",                 // rebase -i todo editor
	"core.hooksPath=/dev/null",             // every hook, reference-transaction included
	"core.attributesFile=/dev/null",        // a global attributes file naming a filter
	"core.alternateRefsCommand=true",       // run to list an alternate's refs
	"remote.origin.uploadpack=git-upload-pack",
	"remote.origin.receivepack=git-receive-pack",
	"diff.external=",     // empty: an external diff fails instead of running
	"credential.helper=", // empty: clears every helper configured before (URL-specific ones too)
	"gpg.program=false",  // signing and verification programs
	"gpg.openpgp.program=false",
	"gpg.x509.program=false",
	"gpg.ssh.program=false",
	"gpg.ssh.defaultKeyCommand=false",
	"commit.gpgSign=false",
	"tag.gpgSign=false",
	"log.showSignature=false",
	"fetch.recurseSubmodules=false", // no git run in a submodule
	"submodule.recurse=false",
	"protocol.allow=never", // transports: none but these
	"protocol.https.allow=always",
	"protocol.ssh.allow=always",
	"protocol.file.allow=user", // local mirrors and test remotes
	"protocol.http.allow=never",
	"protocol.git.allow=never",
	"protocol.ext.allow=never", // ext:: runs a command by design
	"protocol.fd.allow=never",
}

// GitEnv is the environment every git loopd runs gets on top of the
// allowlisted base: no system configuration, no user (global)
// configuration, no system attributes, no replace refs (a replace ref
// changes what a trusted file reads as), and never a prompt.
func GitEnv() []string {
	return []string{
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_TERMINAL_PROMPT=0",
	}
}

// GitPins returns the `-c key=value` pins, as arguments.
func GitPins() []string {
	out := make([]string, 0, 2*len(gitPins))
	for _, p := range gitPins {
		out = append(out, "-c", p)
	}
	return out
}

// GitArgs returns git's arguments for args: --no-pager and the pins first.
func GitArgs(args ...string) []string {
	full := append([]string{"--no-pager"}, GitPins()...)
	return append(full, args...)
}

// Git is the one way loopd runs git: program "git", arguments GitArgs(args),
// environment GitEnv on top of the allowlisted base. Callers set Timeout,
// Dir, Stdin or another program name on the returned Cmd, and add to Env;
// they never drop what Git put there.
//
// It is the second wall. The first: loopd never runs git — hardened or
// not — in a repository or work tree an agent can write, outside that
// agent's sandbox (docs/decisions.md §22).
func Git(args ...string) Cmd {
	return Cmd{Name: "git", Args: GitArgs(args...), Env: GitEnv()}
}
