package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/internal/ops"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/internal/tools"
)

// Row names of the bridge section.
const (
	rowBridgeExec  = "fork-exec of /bin/true"
	rowBridgeCall  = "bridge call: agent → host → /bin/true → agent"
	rowBridgeAdded = "added p50 per call"
)

// bridgeCallTarget is the p50 a bridge call should stay within.
const bridgeCallTarget = 3 * time.Millisecond

// bridgeCall measures a host bridge tool call as an agent makes it: POST
// /ipc/host_tool on a real host socket, the operations service finding the
// tool in its directory (a stat of the files), authorizing, checking the
// arguments, running /bin/true in a cgroup of its own, writing the audit
// row to a real SQLite database, and the answer read back; beside the bare
// fork-exec of /bin/true from this process.
func bridgeCall(ctx context.Context, o Options) Section {
	s := Section{Name: "bridge tools"}
	runs := o.runs()
	o.progress("bench: bridge tools, %d calls", runs)
	dir, err := os.MkdirTemp("", "clawpen-bench-bridge-")
	if err != nil {
		s.Skipped = err.Error()
		return s
	}
	defer os.RemoveAll(dir)
	toolsDir := filepath.Join(dir, "tools")
	if err := os.MkdirAll(toolsDir, 0o700); err != nil {
		s.Skipped = err.Error()
		return s
	}
	def := "---\nname: nothing\ndescription: runs /bin/true\ncommand: [/bin/true]\n---\n"
	if err := os.WriteFile(filepath.Join(toolsDir, "nothing.md"), []byte(def), 0o600); err != nil {
		s.Skipped = err.Error()
		return s
	}
	st, err := store.Open(ctx, filepath.Join(dir, "clawpen.db"))
	if err != nil {
		s.Skipped = err.Error()
		return s
	}
	defer st.Close()
	svc := ops.New(ops.Config{Store: st, GroupsDir: filepath.Join(dir, "groups"), Tools: tools.NewDir(toolsDir), ToolEnv: os.Getenv})
	caller := domain.Caller{Group: domain.MainFolder, IsMain: true, Run: "bench"}
	srv, err := hostsock.Listen(filepath.Join(dir, "host.sock"), -1, -1, caller, hostsock.Config{IPC: svc.Handle})
	if err != nil {
		s.Skipped = err.Error()
		return s
	}
	defer srv.Close()
	defer svc.EndRun(caller.Run)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", srv.Path())
	}}}
	call := func() error {
		resp, err := hc.Post("http://clawpen/ipc/host_tool", "application/json", strings.NewReader(`{"name":"nothing","args":{}}`))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"exit_code":0`) {
			return fmt.Errorf("host answered %s: %s", resp.Status, body)
		}
		return nil
	}
	var eSamples, cSamples []time.Duration
	for i := -1; i < runs; i++ { // one warm-up each, interleaved
		t0 := time.Now()
		if err := exec.CommandContext(ctx, "/bin/true").Run(); err != nil {
			s.Skipped = "/bin/true: " + err.Error()
			return s
		}
		e := time.Since(t0)
		t0 = time.Now()
		if err := call(); err != nil {
			s.Skipped = "bridge call: " + err.Error()
			return s
		}
		c := time.Since(t0)
		if i >= 0 {
			eSamples, cSamples = append(eSamples, e), append(cSamples, c)
		}
	}
	eRow, cRow := Latency(rowBridgeExec, eSamples), Latency(rowBridgeCall, cSamples)
	cRow.RatioTo = rowBridgeExec
	cRow = cRow.WithTarget(fmt.Sprintf("p50 ≤ %d ms", bridgeCallTarget.Milliseconds()), cRow.P50 <= ms(bridgeCallTarget))
	s.Rows = append(s.Rows, eRow, cRow, Value(rowBridgeAdded, "ms", cRow.P50-eRow.P50))
	s.fillRatios()
	s.Notes = []string{
		"fork-exec: exec.Command(\"/bin/true\").Run() from this process.",
		"bridge call: one keep-alive HTTP connection on a real host socket, as clawpen-agent's client; the host re-reads the tools dir's state, authorizes, validates the arguments, runs /bin/true (a cgroup of its own, clean env, capped pipes) and writes the audit row to SQLite.",
	}
	return s
}
