package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/loop"
)

var stateRootFlag = &cli.StringFlag{Name: "state-root", Usage: "theloop's state root, outside any repository (default: $" + loop.StateRootEnv + ", else the CLI config's state.root, a relative one under your home directory: ~/.the-loop)"}

// stateRoot resolves the state root: --state-root (relative to the working
// directory) › loop.OperatorStateRoot — the rule loopd and loop-gate use,
// so the key, the socket and the dashboard login are found where the
// daemon put them.
func (f *Factory) stateRoot(flag, config string) (string, error) {
	if flag != "" {
		return filepath.Abs(flag)
	}
	if r := f.Getenv(loop.StateRootEnv); r != "" {
		return filepath.Abs(r)
	}
	cfg, err := f.cliConfig(config, "")
	if err != nil {
		return "", err
	}
	return f.stateRootOf(cfg)
}

// stateRootOf is the state root of a loaded CLI config.
func (f *Factory) stateRootOf(cfg loop.CLIConfig) (string, error) {
	return loop.OperatorStateRoot(cfg.StateRoot, f.Getenv, f.HomeDir)
}

type keysOptions struct {
	Factory   *Factory
	StateRoot string
	Config    string
	Format    string
}

func newKeysCmd(f *Factory) *cli.Command {
	flags := []cli.Flag{stateRootFlag, &cli.StringFlag{Name: "config", Usage: "the operator's cli-config.yaml", TakesFile: true}}
	opts := func(c *cli.Context) *keysOptions {
		return &keysOptions{Factory: f, StateRoot: c.String("state-root"), Config: c.String("config"), Format: c.String("format")}
	}
	return &cli.Command{
		Name:  "keys",
		Usage: "the key that signs gate decisions (init, show)",
		Description: `A human gate's decision counts only when it is signed by a trusted key
(docs/decisions.md §16). The daemon signs the decisions it records with the
key under its state root; verifiers (check --recompute, graph complete,
loop-gate, CI) trust the public keys given by --trust-key, $THE_LOOP_TRUST_KEYS
or the base branch's .the-loop/trusted-keys (--trust-base / $THE_LOOP_TRUST_BASE).

The private key is never stored in a repository: keys init refuses a state
root inside a git checkout. Its 0600 mode keeps other users out, not the
agent's own processes when they run as the same user: run the daemon under a
user of its own.`,
		Subcommands: []*cli.Command{
			{
				Name:        "init",
				Usage:       "create the signing key under the state root (0600); an existing key is kept",
				Description: "Example:\n   loopctl keys init --state-root /var/lib/theloop",
				Flags:       flags,
				Action: func(c *cli.Context) error {
					return runKeysInit(opts(c))
				},
			},
			{
				Name:        "show",
				Usage:       "print the public key, to commit as .the-loop/trusted-keys or set as a CI variable",
				Description: "Example:\n   loopctl keys show --format env >> $GITHUB_ENV",
				Flags:       append(flags, &cli.StringFlag{Name: "format", Value: "key", Usage: "key (one line), env (THE_LOOP_TRUST_KEYS=...) or file (a trusted-keys line with a label)"}),
				Action: func(c *cli.Context) error {
					return runKeysShow(opts(c))
				},
			},
		},
	}
}

func runKeysInit(opts *keysOptions) error {
	root, err := opts.Factory.stateRoot(opts.StateRoot, opts.Config)
	if err != nil {
		return err
	}
	pub, created, err := loop.InitSigningKey(root)
	if err != nil {
		return failWith(exitFailed, "loopctl keys init: %v", err)
	}
	out := opts.Factory.IO.ErrOut
	if created {
		fmt.Fprintf(out, "created the decision-signing key %s (0600; keep it out of every repository)\n", loop.SigningKeyPath(root))
	} else {
		fmt.Fprintf(out, "the decision-signing key %s already exists; it is kept\n", loop.SigningKeyPath(root))
	}
	fmt.Fprintln(opts.Factory.IO.Out, pub)
	fmt.Fprintf(out, "trust it: commit `loopctl keys show --format file >> %s` on the base branch, or set %s in CI\n", loop.TrustedKeysFile, loop.TrustKeysEnv)
	return nil
}

func runKeysShow(opts *keysOptions) error {
	root, err := opts.Factory.stateRoot(opts.StateRoot, opts.Config)
	if err != nil {
		return err
	}
	s, err := loop.LoadSigningKey(root)
	if err != nil {
		return failWith(exitFailed, "loopctl keys show: %v", err)
	}
	w := opts.Factory.IO.Out
	switch opts.Format {
	case "key", "":
		fmt.Fprintln(w, s.PublicKey())
	case "env":
		fmt.Fprintf(w, "%s=%s\n", loop.TrustKeysEnv, s.PublicKey())
	case "file":
		fmt.Fprintf(w, "%s decision-signing key of %s\n", s.PublicKey(), root)
	default:
		return failWith(exitRefused, "loopctl keys show: --format must be key, env or file, not %q", opts.Format)
	}
	return nil
}

// operatorSigner is the signing key under the state root, when there is
// one: decisions a live verb records from authorized comments (a selection
// read from the ticket thread) are signed with it. A key that exists but
// cannot be used is a warning; decisions are then recorded unsigned.
func (f *Factory) operatorSigner(cfg loop.CLIConfig) (*loop.Signer, string) {
	root, err := f.stateRootOf(cfg)
	if err != nil {
		return nil, ""
	}
	s, err := loop.LoadSigningKey(root)
	if errors.Is(err, loop.ErrNoSigningKey) {
		return nil, ""
	}
	if err != nil {
		return nil, "gate decisions will be recorded unsigned: " + err.Error()
	}
	return s, ""
}
