package bench

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// rig names what only the benchmark needs: its package, the fakes and the
// throwaway PostgreSQL it starts, and what bwrap and faketg export for it
// alone (the linker drops an unused function, and a method no interface in
// the program names).
var rig = []string{"faketg", "fakellm", "pgtest", "bench", "RawCommand", "WithHandOut", "NewBaseline"}

// rigPattern matches any of rig in a line of `go tool nm` or `go version -m`.
var rigPattern = regexp.MustCompile("(?i)" + strings.Join(rig, "|"))

// clawpen, the binary every user runs, holds no benchmark and no fake:
// neither its build information nor its symbol table names any, and no
// source file of theirs was compiled into it. clawpen-bench, built from the
// same module, holds every one of them, so the checks can see what they look
// for.
func TestProductHoldsNoBenchOrFakes(t *testing.T) {
	product := filepath.Join(binDir, "clawpen")
	if hits := rigLines(t, "version", "-m", product); len(hits) > 0 {
		t.Errorf("go version -m %s names the test rig:\n%s", product, strings.Join(hits, "\n"))
	}
	if hits := rigLines(t, "tool", "nm", product); len(hits) > 0 {
		t.Errorf("the symbol table of %s holds %d test-rig symbols, first:\n%s", product, len(hits), strings.Join(hits[:min(len(hits), 20)], "\n"))
	}
	data, err := os.ReadFile(product)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"internal/faketg/", "internal/fakellm/", "internal/store/pgtest/", "internal/bench/", "cmd/clawpen-bench/"} {
		if bytes.Contains(data, []byte(dir)) {
			t.Errorf("%s holds the path %s: a file of it was compiled in", product, dir)
		}
	}

	// The control: the same checks find every one of them in clawpen-bench.
	benchBin := filepath.Join(binDir, "clawpen-bench")
	syms := strings.Join(rigLines(t, "tool", "nm", benchBin), "\n")
	for _, name := range rig {
		if !strings.Contains(strings.ToLower(syms), strings.ToLower(name)) {
			t.Errorf("the symbol table of clawpen-bench holds no %s: the check above cannot see it", name)
		}
	}
	if hits := rigLines(t, "version", "-m", benchBin); len(hits) == 0 {
		t.Error("go version -m clawpen-bench names no bench: the check above cannot see it")
	}
	data, err = os.ReadFile(benchBin)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("internal/faketg/")) {
		t.Error("clawpen-bench holds no path internal/faketg/: the check above cannot see it")
	}
}

// rigLines runs the go command with args and returns its output lines that
// name the test rig.
func rigLines(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	var hits []string
	for _, l := range strings.Split(string(out), "\n") {
		// The binary's own path (a temporary directory) is not the rig.
		l = strings.ReplaceAll(l, binDir, "")
		if rigPattern.MatchString(l) {
			hits = append(hits, l)
		}
	}
	return hits
}
