package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Phish is what the attacker wants the owner to read: HTML, a Markdown link,
// a bare URL, a mention and a bot command, with a marker to look for.
const phish = `<b>Security alert</b> <a href="https://evil.example/login">log in again</a> [Pay here](https://evil.example/pay) evil.example/x @evil_bot /unregister PHISH-MARK`

func init() {
	// agent-stdout LINE...: writes each line to the agent's own stdout
	// (through /proc/<agent>/fd/1; the agent runs as the same user): the
	// host reads it as the agent's output. "error" and "type" are
	// shorthands for an error event and an unknown event type carrying the
	// phish. AGENT-STDOUT=HELD when the sandbox does not let it open that.
	checks["agent-stdout"] = func(args []string) {
		pid, err := agentPID()
		if err != nil {
			fmt.Println("AGENT-STDOUT: no agent process:", err)
			return
		}
		f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/1", pid), os.O_WRONLY, 0)
		if errors.Is(err, os.ErrPermission) {
			fmt.Println("AGENT-STDOUT=HELD open:", err)
			return
		}
		if err != nil {
			fmt.Println("AGENT-STDOUT: open:", err)
			return
		}
		defer f.Close()
		for _, a := range args {
			var line []byte
			switch a {
			case "error":
				line, _ = json.Marshal(map[string]string{"type": "error", "error": phish})
			case "type":
				line, _ = json.Marshal(map[string]string{"type": phish})
			default:
				line = []byte(a)
			}
			if _, err := f.Write(append(line, '\n')); err != nil {
				fmt.Println("AGENT-STDOUT: write:", err)
				return
			}
		}
		fmt.Println("AGENT-STDOUT: written")
	}

	// ipc-flood N OP BODY: N calls of /ipc/OP on the host socket (4 at a
	// time); prints how many got each status.
	checks["ipc-flood"] = func(args []string) {
		if len(args) != 3 {
			fmt.Println("usage: pwn ipc-flood N OP BODY")
			return
		}
		n, _ := strconv.Atoi(args[0])
		var mu sync.Mutex
		counts := map[int]int{}
		var sample string
		work := make(chan int)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for i := range work {
					body := strings.ReplaceAll(args[2], "%N", strconv.Itoa(i))
					status, resp, err := ipcCall(args[1], body)
					mu.Lock()
					if err != nil {
						counts[-1]++
					} else {
						counts[status]++
						if status != 200 && sample == "" {
							sample = resp
						}
					}
					mu.Unlock()
				}
			})
		}
		for i := range n {
			work <- i
		}
		close(work)
		wg.Wait()
		fmt.Printf("FLOOD %s n=%d 200=%d 403=%d other=%d errors=%d sample=%s\n", args[1], n, counts[200], counts[403],
			n-counts[200]-counts[403]-counts[-1], counts[-1], sample)
	}

	// ipc-same OP ID1 ID2: calls OP on two task ids and prints
	// ORACLE-OP=HELD when both answers are the same byte for byte (the
	// ids swapped), ORACLE-OP=BREACH when they tell the two apart.
	checks["ipc-same"] = func(args []string) {
		if len(args) != 3 {
			fmt.Println("usage: pwn ipc-same OP ID1 ID2")
			return
		}
		op, a, b := args[0], args[1], args[2]
		s1, r1, err1 := ipcCall(op, `{"task_id":`+a+`}`)
		s2, r2, err2 := ipcCall(op, `{"task_id":`+b+`}`)
		if err1 != nil || err2 != nil {
			fmt.Printf("ORACLE-%s: call failed: %v %v\n", op, err1, err2)
			return
		}
		fmt.Printf("ORACLE-%s %s -> %d %s\nORACLE-%s %s -> %d %s\n", op, a, s1, r1, op, b, s2, r2)
		if s1 == s2 && r1 == strings.ReplaceAll(r2, b, a) {
			fmt.Printf("ORACLE-%s=HELD\n", op)
		} else {
			fmt.Printf("ORACLE-%s=BREACH\n", op)
		}
	}
}

// agentPID finds the clawpen-agent process among this one's ancestors.
func agentPID() (int, error) {
	pid := os.Getppid()
	for range 16 {
		if pid <= 0 {
			break
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			return 0, err
		}
		if strings.TrimSpace(string(comm)) == "clawpen-agent" {
			return pid, nil
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		// The parent is the second field after the ")" that ends the name.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 {
			return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
		}
		pid, _ = strconv.Atoi(f[1])
	}
	return 0, fmt.Errorf("not below clawpen-agent")
}

var ipcClient = &http.Client{
	Timeout: 20 * time.Second,
	Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", filepath.Join("/run/clawpen", "host.sock"))
		},
		MaxIdleConnsPerHost: 4,
	},
}

// ipcCall posts body to /ipc/op and returns the status and the body.
func ipcCall(op, body string) (int, string, error) {
	resp, err := ipcClient.Post("http://host/ipc/"+op, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, strings.TrimSpace(string(b)), err
}
