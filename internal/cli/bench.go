package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/clawpen/clawpen/internal/app"
	"github.com/clawpen/clawpen/internal/bench"
	"github.com/clawpen/clawpen/internal/config"
)

// benchCmd is `clawpen bench`. It needs no .env, token or key: it starts its
// own fake Telegram and model, so it runs before the configuration is read.
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("clawpen bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "write the report as JSON")
	quick := fs.Bool("quick", false, "small counts: every section runs, figures are rough")
	runs := fs.Int("runs", 0, "samples per latency row (default 200, quick 20)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (go tool pprof) to this file")
	only := fs.String("only", "", "comma-separated sections to run: "+strings.Join(bench.Sections(), ","))
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *runs < 0 {
		fmt.Fprintln(stderr, "usage: clawpen bench [--json] [--quick] [--runs N] [--cpuprofile FILE] [--only "+strings.Join(bench.Sections(), ",")+"]")
		return 2
	}
	o := bench.Options{Quick: *quick, Runs: *runs, Progress: stderr}
	if *only != "" {
		for _, s := range strings.Split(*only, ",") {
			o.Only = append(o.Only, strings.TrimSpace(s))
		}
	}
	var err error
	if o.AgentBin, err = app.AgentBin(config.Config{AgentBin: os.Getenv("CLAWPEN_AGENT_BIN")}); err != nil {
		fmt.Fprintln(stderr, "clawpen bench:", err)
		return 1
	}
	if o.HostBin, err = os.Executable(); err != nil {
		fmt.Fprintln(stderr, "clawpen bench: find clawpen itself:", err)
		return 1
	}
	o.Image = os.Getenv("CLAWPEN_AGENT_IMAGE")
	if o.Image == "" {
		o.Image = config.DefaultAgentImage
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "clawpen bench: cpu profile:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "clawpen bench: cpu profile:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := bench.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "clawpen bench:", err)
		return 1
	}
	if *asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "clawpen bench: write report:", err)
		return 1
	}
	return 0
}
