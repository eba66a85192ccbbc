package main

import (
	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/integrations"
)

func newGitHubCmd(f *Factory) *cli.Command {
	return &cli.Command{
		Name:  "github",
		Usage: "GitHub set-up: the App manifest loopd runs as",
		Subcommands: []*cli.Command{{
			Name:  "app-manifest",
			Usage: "print the manifest for GitHub's App-manifest flow, with exactly the permissions the shipped graphs need",
			Description: "Post it to https://github.com/settings/apps/new (or /organizations/ORG/settings/apps/new) as the\n" +
				"form field \"manifest\"; then set integrations.github.app {appId, slug, privateKeyFile} from the App created.\n" +
				"Example:\n   loopctl github app-manifest --webhook-url https://loopd.example.com/gh-webhook --rule team:acme/reviewers",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "name", Usage: "the App's name", Value: "theloop"},
				&cli.StringFlag{Name: "url", Usage: "the App's homepage"},
				&cli.StringFlag{Name: "webhook-url", Usage: "where GitHub delivers events (loopd's webhook as the internet reaches it)"},
				&cli.StringSliceFlag{Name: "rule", Usage: "a routing.authorized rule the App must be able to answer (team:ORG/SLUG, codeowners)"},
			},
			Action: func(c *cli.Context) error {
				b, err := integrations.AppManifest(integrations.AppManifestOptions{
					Name: c.String("name"), URL: c.String("url"), WebhookURL: c.String("webhook-url"), Rules: c.StringSlice("rule"),
				})
				if err != nil {
					return failWith(exitRefused, "loopctl github app-manifest: %v", err)
				}
				_, err = f.IO.Out.Write(append(b, '\n'))
				return err
			},
		}},
	}
}
