// Package bench checks clawpen-bench: the built binary, run as an operator
// would (no .env, no token), must measure every row of every section. The
// figures themselves are reported, never asserted. And clawpen, the binary
// every user runs, must hold neither the bench nor the fakes it starts.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawpen/clawpen/internal/bench"
	"github.com/clawpen/clawpen/internal/config"
)

// binDir holds clawpen, clawpen-agent and clawpen-bench side by side, as
// `make bench` builds them.
var binDir string

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "clawpen-bench-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	_ = os.Chmod(dir, 0o755) // the sandbox user runs the agent from here
	binDir = dir
	for _, b := range []struct{ pkg, cgo string }{{"clawpen", "1"}, {"clawpen-agent", "0"}, {"clawpen-bench", "1"}} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b.pkg), "./cmd/"+b.pkg)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+b.cgo)
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.pkg, err, out)
			return 1
		}
	}
	return m.Run()
}

// want is one row the report must hold.
type want struct {
	name, ratioTo string
	target        bool // carries a target and whether it is met
	docker        bool // may be skipped, with a reason, when Docker cannot run
	root          bool // may be skipped, with a reason, when not root
}

var wantSections = map[string][]want{
	"sandbox start": {
		{name: "fork-exec /bin/true"},
		{name: "raw bwrap /bin/true"},
		{name: "raw bwrap, minimal view, /bin/true", ratioTo: "raw bwrap /bin/true"},
		{name: "clawpen bwrap /bin/true", ratioTo: "raw bwrap /bin/true"},
		{name: "clawpen bwrap agent-ready, no cgroup/seccomp/keyring", ratioTo: "raw bwrap /bin/true"},
		{name: "clawpen bwrap agent-ready", ratioTo: "raw bwrap /bin/true", target: true},
		{name: "clawpen bwrap agent-ready, pinned", ratioTo: "raw bwrap /bin/true", root: true},
		{name: "docker run --rm (CLI)", docker: true},
		{name: "docker Go client create→start→wait→remove", ratioTo: "docker run --rm (CLI)", docker: true},
		{name: "clawpen docker agent-ready", ratioTo: "docker run --rm (CLI)", docker: true},
	},
	"host overhead": {
		{name: "update received → sandbox start", target: true},
		{name: "agent result → sendMessage", target: true},
	},
}

func TestBenchQuickJSON(t *testing.T) {
	// The bound only ends a hung run; how long the bench takes is not tested.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	work := t.TempDir() // no .env here: bench must not need one
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "clawpen-bench"), "--quick", "--json", "--only", "sandbox,overhead")
	cmd.Dir = work
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + work}
	image := os.Getenv("CLAWPEN_AGENT_IMAGE")
	if image != "" {
		cmd.Env = append(cmd.Env, "CLAWPEN_AGENT_IMAGE="+image)
	} else {
		image = config.DefaultAgentImage
	}
	for _, k := range []string{"DOCKER_HOST", "DOCKER_API_VERSION"} {
		if v := os.Getenv(k); v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("clawpen-bench: %v\nstderr:\n%s", err, stderr.String())
	}
	t.Logf("clawpen-bench --quick took %v", time.Since(start).Round(time.Millisecond))

	var rep bench.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout.String())
	}
	if !rep.Machine.Quick || rep.Machine.CPUs <= 0 {
		t.Errorf("machine = %+v, want quick and a CPU count", rep.Machine)
	}
	dockerWhy := dockerUnavailable(ctx, image)
	got := map[string]bench.Section{}
	for _, s := range rep.Sections {
		got[s.Name] = s
	}
	if len(got) != len(wantSections) {
		t.Errorf("sections %v, want exactly those of --only sandbox,overhead", rep.Sections)
	}
	for name, rows := range wantSections {
		s, ok := got[name]
		if !ok {
			t.Errorf("section %q missing", name)
			continue
		}
		if s.Skipped != "" {
			t.Errorf("section %q skipped: %s", name, s.Skipped)
			continue
		}
		for _, w := range rows {
			checkRow(t, s, w, dockerWhy)
		}
	}
}

func checkRow(t *testing.T, s bench.Section, w want, dockerWhy string) {
	t.Helper()
	var r *bench.Row
	for i := range s.Rows {
		if s.Rows[i].Name == w.name {
			r = &s.Rows[i]
		}
	}
	switch {
	case r == nil:
		t.Errorf("%s: row %q missing", s.Name, w.name)
		return
	case r.Skipped != "" && w.docker && dockerWhy != "":
		if !strings.Contains(r.Skipped, " ") {
			t.Errorf("%s: skipped without a reason: %q", w.name, r.Skipped)
		}
		t.Logf("%s skipped (%s; the test saw: %s)", w.name, r.Skipped, dockerWhy)
		return
	case r.Skipped != "" && w.root && os.Geteuid() != 0:
		return
	case r.Skipped != "":
		t.Errorf("%s: skipped: %s", w.name, r.Skipped)
		return
	}
	if r.Runs <= 0 || r.Min <= 0 || r.P50 < r.Min || r.P95 < r.P50 || r.P99 < r.P95 || r.Unit != "ms" {
		t.Errorf("%s: runs %d, min %v p50 %v p95 %v p99 %v %s: want positive, ordered ms quantiles", w.name, r.Runs, r.Min, r.P50, r.P95, r.P99, r.Unit)
	}
	if r.RatioTo != w.ratioTo {
		t.Errorf("%s: ratio to %q, want %q", w.name, r.RatioTo, w.ratioTo)
	}
	if w.ratioTo != "" && r.Ratio <= 0 {
		t.Errorf("%s: ratio to %q not filled", w.name, w.ratioTo)
	}
	if w.target && (r.Target == "" || r.Met == nil) {
		t.Errorf("%s: no target or no verdict (target %q)", w.name, r.Target)
	}
}

// dockerUnavailable says why Docker rows may be skipped here ("" when they may not).
func dockerUnavailable(ctx context.Context, image string) string {
	if out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		return fmt.Sprintf("docker info: %v: %s", err, bytes.TrimSpace(out))
	}
	if out, err := exec.CommandContext(ctx, "docker", "image", "inspect", image).CombinedOutput(); err != nil {
		return fmt.Sprintf("no image %s: %s", image, bytes.TrimSpace(out))
	}
	return ""
}

// quickReport runs `clawpen-bench --quick --json --only sections` from an
// empty directory (no .env) and returns its report.
func quickReport(t *testing.T, sections string) bench.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // ends a hung run only
	defer cancel()
	work := t.TempDir()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "clawpen-bench"), "--quick", "--json", "--only", sections)
	cmd.Dir = work
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + work}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("clawpen-bench: %v\nstderr:\n%s", err, stderr.String())
	}
	var rep bench.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout.String())
	}
	return rep
}

// The throughput, footprint and scaling sections run too (small counts):
// every row holds a figure, and the targets carry a verdict.
func TestBenchQuickThroughputFootprintScaling(t *testing.T) {
	rep := quickReport(t, "inbound,footprint,scaling")
	if len(rep.Sections) != 3 {
		t.Fatalf("%d sections, want inbound, footprint and scaling", len(rep.Sections))
	}
	targets := 0
	for _, s := range rep.Sections {
		if s.Skipped != "" {
			t.Errorf("section %q skipped: %s", s.Name, s.Skipped)
			continue
		}
		if len(s.Rows) < 3 {
			t.Errorf("section %q has %d rows", s.Name, len(s.Rows))
		}
		for _, r := range s.Rows {
			switch {
			case r.Skipped != "":
				t.Errorf("%s: %s skipped: %s", s.Name, r.Name, r.Skipped)
			case r.Runs == 0 && r.Value <= 0:
				t.Errorf("%s: %s holds no figure", s.Name, r.Name)
			case r.RatioTo != "" && r.Ratio <= 0:
				t.Errorf("%s: %s: ratio to %q not filled", s.Name, r.Name, r.RatioTo)
			}
			if r.Target != "" {
				targets++
				if r.Met == nil {
					t.Errorf("%s: %s: target %q without a verdict", s.Name, r.Name, r.Target)
				}
			}
		}
	}
	// ≥ 2,000 msgs/s, idle RSS ≤ 12 MB, < 40 MB with 1,000 groups.
	if targets < 3 {
		t.Errorf("%d rows carry a target, want at least 3", targets)
	}
}
