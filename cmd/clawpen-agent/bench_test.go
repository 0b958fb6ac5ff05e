package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/fakellm"
)

// BenchmarkAgentCPU runs the built agent binary, as a sandbox runs it, on a
// job against the fake provider on a unix socket, and reports what one run
// costs: CPU (user+sys of the process, from its rusage) and the wall time
// from its start to its first model request, alone (plain) and in a
// minimal bubblewrap when bwrap is installed. CPU and page faults are the
// agent's own (plain only); most of them are its start-up, paid before the
// job is read, so a warm sandbox pays them ahead of the message.
//
//	go test -bench AgentCPU -run '^$' ./cmd/clawpen-agent/
//	CLAWPEN_BENCH_AGENT_BIN=/tmp/old-agent go test -bench AgentCPU -run '^$' ./cmd/clawpen-agent/
func BenchmarkAgentCPU(b *testing.B) {
	bin := os.Getenv("CLAWPEN_BENCH_AGENT_BIN") // another build to compare, such as the previous commit's
	if bin == "" {
		bin = filepath.Join(b.TempDir(), "clawpen-agent")
		// As the Makefile builds it for the sandbox.
		build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("build: %v\n%s", err, out)
		}
	}

	llm := fakellm.NewHandler()
	var firstReq atomic.Int64 // unix nanos of the first model request of the current run
	mux := http.NewServeMux()
	mux.Handle("/v1/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		firstReq.CompareAndSwap(0, time.Now().UnixNano())
		llm.ServeHTTP(w, r)
	}))
	mux.HandleFunc("/ipc/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	dir, err := os.MkdirTemp("", "cpb") // short: unix socket paths are limited
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "host.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })

	jobs := []struct {
		name string
		job  domain.Job
	}{
		{"echo", domain.Job{ContextMode: "isolated", Prompt: "hi there"}},
		// A session: the transcript is read and written, one tool runs.
		{"group-tool", domain.Job{ContextMode: "group", Prompt: `TOOL list_files {"path":"."}`}},
	}
	// plain is the agent alone; bwrap adds a minimal bubblewrap around it, as
	// far as the agent's world goes (its paths exist there), so the figures
	// include bwrap's start, as a message pays it.
	wrappers := []struct {
		name string
		cmd  func(home, group string) *exec.Cmd
	}{
		{"plain", func(_, _ string) *exec.Cmd {
			cmd := exec.Command(bin)
			cmd.Env = []string{"CLAWPEN_HOST_SOCKET=" + sock}
			return cmd
		}},
	}
	if bw, err := exec.LookPath("bwrap"); err == nil {
		wrappers = append(wrappers, struct {
			name string
			cmd  func(home, group string) *exec.Cmd
		}{"bwrap", func(home, group string) *exec.Cmd {
			return exec.Command(bw, "--unshare-all", "--die-with-parent", "--new-session",
				"--ro-bind", bin, "/clawpen-agent", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
				"--bind", group, domain.GroupPath, "--dir", domain.GlobalPath,
				"--bind", home, domain.HomePath, "--bind", sock, domain.SocketPath,
				"--chdir", domain.GroupPath, "--clearenv", "/clawpen-agent")
		}})
	}
	for _, w := range wrappers {
		for _, jb := range jobs {
			b.Run(w.name+"/"+jb.name, func(b *testing.B) {
				j := jb.job
				j.Version, j.Group, j.Model = domain.JobVersion, "g", "claude-test"
				job, err := json.Marshal(j)
				if err != nil {
					b.Fatal(err)
				}
				root := b.TempDir()
				home, group := filepath.Join(root, "home"), filepath.Join(root, "group")
				if err := os.MkdirAll(group, 0o755); err != nil {
					b.Fatal(err)
				}
				var cpu, toReq time.Duration
				var faults int64
				runs := 0
				for b.Loop() {
					_ = os.RemoveAll(home) // each run starts the session afresh
					if err := os.MkdirAll(home, 0o755); err != nil {
						b.Fatal(err)
					}
					cmd := w.cmd(home, group)
					cmd.Dir = group
					cmd.Stdin = bytes.NewReader(job)
					var stdout, stderr bytes.Buffer
					cmd.Stdout, cmd.Stderr = &stdout, &stderr
					firstReq.Store(0)
					start := time.Now()
					if err := cmd.Run(); err != nil {
						b.Fatalf("agent: %v\nstdout: %s\nstderr: %s", err, stdout.Bytes(), stderr.Bytes())
					}
					if !bytes.Contains(stdout.Bytes(), []byte(`"type":"result"`)) || firstReq.Load() == 0 {
						b.Fatalf("no result or no model request: %s\nstderr: %s", stdout.Bytes(), stderr.Bytes())
					}
					// wait4's rusage: the process and every descendant it waited for.
					cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
					if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
						faults += ru.Minflt + ru.Majflt
					}
					toReq += time.Unix(0, firstReq.Load()).Sub(start)
					runs++
				}
				if w.name == "plain" { // bwrap's rusage misses the agent: its pid 1 reaps it
					b.ReportMetric(float64(cpu.Microseconds())/1000/float64(runs), "cpu-ms/run")
					b.ReportMetric(float64(faults)/float64(runs), "faults/run")
				}
				b.ReportMetric(float64(toReq.Microseconds())/1000/float64(runs), "ms-to-request")
			})
		}
	}
}
