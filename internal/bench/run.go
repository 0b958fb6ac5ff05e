package bench

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Options controls one bench run.
type Options struct {
	// Quick takes small counts (CI checks that every section runs; the
	// figures are rough).
	Quick bool
	// Runs is the number of samples per latency row; 0 = 200 (quick: 20).
	Runs int
	// AgentBin is the static clawpen-agent; HostBin is the clawpen binary
	// (HostBin finds it), run as `clawpen serve` for the footprint and
	// serve-path figures.
	AgentBin, HostBin string
	// Image is the Docker agent image for the Docker rows.
	Image string
	// SandboxUser names the dedicated user a root host runs sandboxes as
	// (CLAWPEN_SANDBOX_USER; "" = the default), as `clawpen serve` does.
	SandboxUser string
	// Only, when non-empty, names the sections to run (see Sections).
	Only []string
	// Progress receives one line per step (stderr), never the report.
	Progress io.Writer
}

func (o Options) runs() int {
	switch {
	case o.Runs > 0:
		return o.Runs
	case o.Quick:
		return 20
	default:
		return 200
	}
}

func (o Options) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// section is one named part of the report.
type section struct {
	name string
	run  func(ctx context.Context, o Options) Section
}

// Sections lists the section names in report order.
func Sections() []string {
	var names []string
	for _, s := range sections() {
		names = append(names, s.name)
	}
	return names
}

func sections() []section {
	return []section{
		{"sandbox", sandboxStart},
		{"overhead", hostOverhead},
		{"inbound", inboundThroughput},
		{"store", storeCompare},
		{"footprint", footprint},
		{"scaling", scaling},
		{"egress", egressProxy},
		{"metrics", metricsCost},
		{"bridge", bridgeCall},
		{"approval", approvalPress},
		{"drafts", liveDrafts},
		{"warm", warmPath},
	}
}

// Run measures every section (or those in o.Only) and returns the report.
// A section that cannot run on this machine says why instead of failing the run.
func Run(ctx context.Context, o Options) (*Report, error) {
	for _, n := range o.Only {
		if !slices.Contains(Sections(), n) {
			return nil, fmt.Errorf("unknown section %q (have %s)", n, strings.Join(Sections(), ", "))
		}
	}
	rep := &Report{Machine: machine(ctx, o)}
	for _, s := range sections() {
		if len(o.Only) > 0 && !slices.Contains(o.Only, s.name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		o.progress("bench: %s", s.name)
		rep.Sections = append(rep.Sections, s.run(ctx, o))
	}
	return rep, nil
}

func machine(ctx context.Context, o Options) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Quick: o.Quick}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if out, err := exec.CommandContext(ctx, "bwrap", "--version").Output(); err == nil {
		m.Bwrap = strings.TrimPrefix(strings.TrimSpace(string(out)), "bubblewrap ")
	}
	if out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").Output(); err == nil {
		m.Docker = strings.TrimSpace(string(out))
	}
	return m
}
