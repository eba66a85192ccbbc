package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/internal/buildinfo"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/loop/daemon/systemd"
)

// runOptions are `loopd run`'s flags.
type runOptions struct {
	Config    string
	StateRoot string
	Insecure  bool
	// UpgradePlugin upgrades theloop's plugin for the installed harnesses
	// before serving: set by a restart with upgrade (restart.go).
	UpgradePlugin bool
	cli           *cli.Context // for the dashboard flags (dashboard.go)
}

func runCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "run the daemon in the foreground until SIGTERM (which drains in-flight work)",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "the operator's cli-config.yaml (default: $THE_LOOP_CLI_CONFIG, ./.the-loop/cli-config.yaml, ~/.the-loop/cli-config.yaml)", TakesFile: true},
			&cli.StringFlag{Name: "state-root", Usage: "theloop's state root, outside any repository (default: $THE_LOOP_STATE_ROOT, else the config's state.root, a relative one under your home directory: ~/.the-loop)"},
			&cli.BoolFlag{Name: "insecure-accept-unsigned", Usage: "accept webhooks without a signature when no secret is configured (never on a reachable address)"},
			&cli.BoolFlag{Name: upgradePluginFlag, Hidden: true, Usage: "upgrade theloop's plugin for the installed harnesses before serving (a restart with upgrade passes it)"},
		}, dashboardFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return &exitError{code: exitRefused, msg: fmt.Sprintf("run takes no arguments (got %q)", c.Args().First())}
			}
			return runDaemon(e, runOptions{Config: c.String("config"), StateRoot: c.String("state-root"), Insecure: c.Bool("insecure-accept-unsigned"), UpgradePlugin: c.Bool(upgradePluginFlag), cli: c})
		},
	}
}

func runDaemon(e *env, opts runOptions) error {
	wd, err := e.Getwd()
	if err != nil {
		return err
	}
	cfg, warns, err := loadConfig(e, opts, wd)
	if err != nil {
		return &exitError{code: exitRefused, msg: err.Error()}
	}
	// Every record is scrubbed of the credentials the configuration names
	// and of token-shaped text before it is written.
	logger := daemon.ScrubLogger(daemon.NewLogger(e.Stderr, slog.LevelInfo), cfg, e.LookupEnv)
	for _, w := range warns {
		logger.Warn(w)
	}
	if len(cfg.Secret) == 0 && opts.Insecure {
		cfg.InsecureAcceptUnsigned = true
		logger.Warn("no webhook secret: accepting UNSIGNED webhooks (--insecure-accept-unsigned)")
	}
	var operator graph.Integrations
	if opts.cli != nil {
		if operator, err = setUpDashboard(e, opts.cli, &cfg); err != nil {
			return &exitError{code: exitRefused, msg: err.Error()}
		}
	}
	d, err := daemon.New(cfg, daemon.Deps{Version: buildinfo.Version(version), Clock: e.clock(), Log: daemon.LogWriter(logger), Logger: logger, OperatorIntegrations: operator})
	if err != nil {
		// A configuration loopd cannot run with (no secret, a relative
		// state root, ...): exit 2 with the fix.
		return &exitError{code: exitRefused, msg: err.Error()}
	}
	if opts.UpgradePlugin {
		// Before anything is served or spawned: a session started now gets
		// the upgraded plugin.
		d.NotePluginUpgrade(upgradePlugins(e, logger))
	}
	// Fail fast: a loopd that would start "healthy" and then fail on every
	// item exits 2 now, naming the key and the fix.
	if err := daemon.CheckCanWork(cfg, integrations.Deps{Env: e.LookupEnv}); err != nil {
		return &exitError{code: exitRefused, msg: err.Error()}
	}
	ctx, cancel := e.Context()
	defer cancel()
	// Type=notify: READY=1 once listening, watchdog pings while healthy,
	// STOPPING=1 when SIGTERM starts the drain (no-ops outside systemd).
	notifier := systemd.Start(ctx, d.Ready(), systemd.Options{Health: d.Healthy, Status: d.StatusLine})
	defer notifier.Close()
	go func() {
		<-ctx.Done()
		notifier.Stopping()
	}()
	go func() {
		select {
		case <-d.Ready():
			logger.Info("listening", "webhook", d.WebhookURL(), "stateRoot", cfg.StateRoot, "controlSocket", d.ControlSocket())
			if u := d.DashboardURL(); u != "" {
				logger.Info("dashboard (log in with: loopctl dashboard --open)", "url", u)
			}
		case <-ctx.Done():
		}
	}()
	// SIGHUP reloads the soft policy from the same file; a reload that
	// fails keeps the running configuration and says why.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				reloadDaemon(e, opts, wd, d, logger)
			}
		}
	}()
	if err := d.Run(ctx); err != nil {
		if errors.Is(err, daemon.ErrLocked) {
			return &exitError{code: exitRefused, msg: err.Error()}
		}
		if errors.Is(err, daemon.ErrRestartToRecover) {
			return &exitError{code: exitRestart, msg: err.Error()}
		}
		var re *daemon.RestartError
		if errors.As(err, &re) {
			logger.Info("restarting", "by", re.Actor, "withUpgrade", re.WithUpgrade)
			return &restartError{withUpgrade: re.WithUpgrade}
		}
		return err
	}
	return nil
}

// loadConfig reads the daemon's configuration from the operator's CLI
// config (--config, else looked up from wd) with --state-root applied
// (relative to wd); it returns the config's warnings and the daemon's.
func loadConfig(e *env, opts runOptions, wd string) (daemon.Config, []string, error) {
	getenv := e.Getenv
	if opts.StateRoot != "" {
		// --state-root is read as THE_LOOP_STATE_ROOT is, by the one
		// resolution of the settings: what derives from the state root
		// (the event log above all) follows it, never the working
		// directory.
		root := opts.StateRoot
		if !filepath.IsAbs(root) {
			root = filepath.Join(wd, root)
		}
		getenv = func(k string) string {
			if k == loop.StateRootEnv {
				return root
			}
			return e.Getenv(k)
		}
	}
	cliCfg, err := loop.LoadCLIConfig(loop.CLIConfigSource{Path: opts.Config, LookupEnv: e.LookupEnv, HomeDir: e.HomeDir, WorkDir: wd})
	if err != nil {
		return daemon.Config{}, nil, err
	}
	cfg, warns, err := daemon.ConfigFromCLI(cliCfg, getenv, wd)
	if err != nil {
		return daemon.Config{}, nil, err
	}
	if opts.StateRoot != "" {
		cfg.StateRoot = opts.StateRoot
		if !filepath.IsAbs(cfg.StateRoot) {
			cfg.StateRoot = filepath.Join(wd, cfg.StateRoot)
		}
	}
	// The event log is under the state root just chosen, never wd.
	cfg.EventLog.Path = cfg.EventLogFile()
	return cfg, append(cliCfg.Warnings, warns...), nil
}

// reloadDaemon re-reads the configuration and applies its soft policy.
func reloadDaemon(e *env, opts runOptions, wd string, d *daemon.Daemon, logger *slog.Logger) {
	fail := func(err error) {
		logger.Error("reload failed; the running configuration stays", "error", err.Error())
	}
	cfg, warns, err := loadConfig(e, opts, wd)
	if err != nil {
		fail(err)
		return
	}
	for _, w := range warns {
		logger.Warn(w)
	}
	res, err := d.Reload(cfg)
	if err != nil {
		fail(err)
		return
	}
	logger.Info("configuration reloaded", "applied", res.Applied, "needRestart", res.NeedRestart)
}
