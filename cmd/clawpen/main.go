// Command clawpen is the trusted host: it talks to Telegram, routes messages
// by group and runs each agent invocation in a sandbox.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/clawpen/clawpen/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.Env{Version: version, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, DotEnv: ".env", Getenv: os.Getenv})
	stop()
	os.Exit(code)
}
