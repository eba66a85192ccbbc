package main

import "github.com/urfave/cli/v2"

type installOptions struct{}

func newInstallCmd(f *Factory, runF func(*installOptions) error) *cli.Command {
	return &cli.Command{Name: "install"}
}
