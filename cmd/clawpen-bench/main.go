// Command clawpen-bench measures sandbox start, the host's overhead, inbound
// throughput, footprint and scaling on this machine (internal/bench). It is
// a program of its own so that the benchmark and the fakes it starts never
// ship in clawpen; it runs the clawpen binary beside it for the serve rows.
// It needs no token or key.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"

	"github.com/clawpen/clawpen/internal/app"
	"github.com/clawpen/clawpen/internal/bench"
	"github.com/clawpen/clawpen/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// usageError is a wrong command line: exit 2 with the usage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// run is the whole command: 0 done, 1 the bench failed, 2 a wrong command
// line (the error names the bad part; the usage follows), as clawpen's.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("clawpen-bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed below, with the usage
	asJSON := fs.Bool("json", false, "write the report as JSON")
	quick := fs.Bool("quick", false, "small counts: every section runs, figures are rough")
	runs := fs.Int("runs", 0, "`N` samples per latency row (default 200, quick 20)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (go tool pprof) to `file`")
	only := fs.String("only", "", "comma-separated `sections` to run: "+strings.Join(bench.Sections(), ","))
	usage := func(w io.Writer) {
		fmt.Fprint(w, "Usage: clawpen-bench [flags]\n\n"+
			"Measures sandbox start, host overhead, throughput, footprint and scaling on this\n"+
			"machine. Starts its own fake Telegram and model on loopback; needs no token or key.\n"+
			"Runs the clawpen beside it (else in $PATH) as `clawpen serve`; uses CLAWPEN_AGENT_BIN,\n"+
			"CLAWPEN_SANDBOX_USER and CLAWPEN_AGENT_IMAGE as serve does.\n\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}

	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout)
		return 0
	}
	o := bench.Options{Quick: *quick, Runs: *runs, Progress: stderr}
	if err == nil {
		o.Only, err = parseOnly(*only)
	}
	switch {
	case err != nil:
	case fs.NArg() > 0:
		err = usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	case *runs < 0:
		err = usageError{fmt.Sprintf("--runs %d: want 0 or more", *runs)}
	}
	if err != nil {
		fmt.Fprintf(stderr, "clawpen-bench: %v\n\n", err)
		usage(stderr)
		return 2
	}

	if err := measure(ctx, o, getenv, stdout, *asJSON, *cpuProfile); err != nil {
		fmt.Fprintf(stderr, "clawpen-bench: %v\n", err)
		return 1
	}
	return 0
}

// parseOnly splits --only into known section names.
func parseOnly(only string) ([]string, error) {
	if only == "" {
		return nil, nil
	}
	var names []string
	for _, sec := range strings.Split(only, ",") {
		sec = strings.TrimSpace(sec)
		if !slices.Contains(bench.Sections(), sec) {
			return nil, usageError{fmt.Sprintf("--only: unknown section %q (have %s)", sec, strings.Join(bench.Sections(), ", "))}
		}
		names = append(names, sec)
	}
	return names, nil
}

// measure reads the configuration as clawpen does (.env in the working
// directory, then the environment), finds the binaries and runs the bench.
func measure(ctx context.Context, o bench.Options, getenv func(string) string, stdout io.Writer, asJSON bool, cpuProfile string) error {
	if err := config.LoadDotEnv(".env"); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	cfg, err := config.FromEnv(getenv)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	o.SandboxUser, o.Image = cfg.SandboxUser, cfg.AgentImage
	if o.AgentBin, err = app.AgentBin(cfg); err != nil {
		return err
	}
	if o.HostBin, err = bench.HostBin(); err != nil {
		return err
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := bench.Run(ctx, o)
	if err != nil {
		return err
	}
	if asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
