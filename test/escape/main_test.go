// Package escape is the escape suite: a table of attacks, each run from inside
// a real sandbox by the real clawpen-agent tool path (a group member's
// triggered message makes the fake model call the agent's tools), each
// asserting that the attack fails and that the host answers afterwards. It
// runs on the backend the harness is set to (bwrap, Docker with
// CLAWPEN_E2E_SANDBOX=docker, gVisor with CLAWPEN_E2E_SANDBOX=gvisor) and
// prints attack × backend → blocked/ESCAPED (host-kernel: a row only a
// kernel of its own holds, on a backend sharing the host's).
package escape

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/clawpen/clawpen/test/harness"
)

// pwnBin is the attacker's own static helper (./pwn), built once.
var pwnBin string

// Outcomes of one attack.
const (
	blocked  = "blocked"
	escaped  = "ESCAPED"
	hostDown = "HOST-DOWN"    // the attack failed but the host stopped answering
	unclear  = "INCONCLUSIVE" // the expected "held" evidence is missing
)

// results is attack → outcome, filled by the subtests and printed by TestMain.
type resultTable struct {
	mu    sync.Mutex
	order []string
	m     map[string]string
	notes map[string]string
}

var results = &resultTable{m: map[string]string{}, notes: map[string]string{}}

func (r *resultTable) set(attack, outcome, note string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[attack]; !ok {
		r.order = append(r.order, attack)
	}
	r.m[attack], r.notes[attack] = outcome, note
}

func (r *resultTable) print(w io.Writer, backend string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	counts := map[string]int{}
	fmt.Fprintf(w, "\nescape suite, backend %s:\n", backend)
	fmt.Fprintf(w, "  %-22s %-8s %s\n", "attack", backend, "")
	for _, a := range r.order {
		counts[r.m[a]]++
		note := r.notes[a]
		if note != "" {
			note = "  (" + note + ")"
		}
		fmt.Fprintf(w, "  %-22s %-8s%s\n", a, r.m[a], note)
	}
	var sum []string
	for k, v := range counts {
		sum = append(sum, fmt.Sprintf("%d %s", v, k))
	}
	sort.Strings(sum)
	fmt.Fprintf(w, "  total: %s\n\n", strings.Join(sum, ", "))
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse() // testing.Verbose needs the flags before m.Run parses them
	cleanup, err := harness.Setup()
	defer cleanup()
	if errors.Is(err, harness.ErrSkip) {
		fmt.Fprintln(reportWriter(0), "escape suite, backend docker: SKIP (no Docker engine answers)")
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	root, err := harness.Root()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pwnBin = filepath.Join(harness.BinDir(), "pwn")
	cmd := exec.Command("go", "build", "-o", pwnBin, "./test/escape/pwn")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build pwn: %v\n%s", err, out)
		return 1
	}
	code := harness.CheckLeftovers(m.Run())
	results.print(reportWriter(code), harness.Backend())
	return code
}

// reportWriter is where the table goes so that `make test` shows it: go test
// shows a passing package's output only with -v, so without it the table
// goes to the go command's own stdout (the test binary's parent), when that
// can be opened.
func reportWriter(code int) io.Writer {
	if testing.Verbose() || code != 0 {
		return os.Stdout
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/1", os.Getppid()), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return os.Stdout
	}
	// A `go test >file` keeps writing at its own offset, over what we
	// appended: a blank line of padding takes its "ok" line instead.
	fmt.Fprintln(f, strings.Repeat(" ", 120))
	return f // closed at exit
}
