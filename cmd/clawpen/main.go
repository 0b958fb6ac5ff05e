// Command clawpen is the trusted host: it talks to Telegram, routes messages
// by group and runs each agent invocation in a sandbox.
package main

import (
	"os"

	"github.com/clawpen/clawpen/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(cli.Run(os.Args[1:], version, os.Stdout, os.Stderr))
}
