package load

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// goroutineSlack is how many more goroutines the idle host may run after
// the last load phase than before it: a pooled keep-alive connection more
// or less (two goroutines each) and a request of this very reading.
const goroutineSlack = 5

// freeLoopbackAddr picks a port for the host's CLAWPEN_DEBUG_ADDR. Another
// process could take it before the host binds; the host then fails to
// start, loudly, which is not a wrong result.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free loopback port: %w", err)
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// debugGet fetches one path of the host's debug endpoint. The connection is
// closed after it, so the reading itself leaves no keep-alive goroutine.
func debugGet(ctx context.Context, addr, path string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, fmt.Errorf("debug endpoint %s: %w", path, err)
	}
	req.Close = true
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("debug endpoint %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("debug endpoint %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("debug endpoint %s: %s", path, resp.Status)
	}
	return body, nil
}

// goroutines reads the host's goroutine count from the first line of the
// goroutine profile, "goroutine profile: total N".
func goroutines(ctx context.Context, addr string) (int, error) {
	body, err := debugGet(ctx, addr, "/debug/pprof/goroutine?debug=1", 10*time.Second)
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(body), "\n")
	n, err := strconv.Atoi(strings.TrimPrefix(line, "goroutine profile: total "))
	if err != nil {
		return 0, fmt.Errorf("goroutine profile: unexpected first line %q", line)
	}
	return n, nil
}

// settledGoroutines polls the count until it has settled: the same value
// three times in a row, or at most limit (when it is no higher than that,
// the leak check passes anyway), or bound has passed. It returns the last
// reading. No timing is asserted: the bound only ends the wait.
func settledGoroutines(ctx context.Context, addr string, limit int, bound time.Duration) (int, error) {
	deadline := time.Now().Add(bound)
	last, same := -1, 0
	for {
		n, err := goroutines(ctx, addr)
		if err != nil {
			return 0, err
		}
		if n == last {
			same++
		} else {
			last, same = n, 1
		}
		if same >= 3 || (limit > 0 && n <= limit) || time.Now().After(deadline) {
			return n, nil
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// profileMidLoad saves a CPU profile and a goroutine dump of the host into
// dir (CLAWPEN_LOAD_PROFILE), to see where answer latency goes under load:
// `go tool pprof -top <bin> cpu.pprof`, and the dump read as text.
func profileMidLoad(ctx context.Context, addr, dir string, seconds int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("profile dir: %w", err)
	}
	dump := func(name string) error {
		body, err := debugGet(ctx, addr, "/debug/pprof/goroutine?debug=1", 30*time.Second)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name), body, 0o644)
	}
	if err := dump("goroutines-start.txt"); err != nil {
		return err
	}
	body, err := debugGet(ctx, addr, fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds), time.Duration(seconds+30)*time.Second)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.pprof"), body, 0o644); err != nil {
		return fmt.Errorf("save cpu profile: %w", err)
	}
	return dump("goroutines-end.txt")
}

// goroutineSummary condenses a debug=1 dump into its biggest groups of
// identical stacks: count and the innermost clawpen frame, for the log.
func goroutineSummary(dump []byte, top int) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(dump)))
	shown := 0
	for sc.Scan() && shown < top {
		line := sc.Text()
		if !strings.Contains(line, " @ 0x") {
			continue
		}
		count, _, _ := strings.Cut(line, " @ ")
		frame := ""
		for sc.Scan() {
			l := sc.Text()
			if l == "" {
				break
			}
			if frame == "" && strings.Contains(l, "clawpen/internal/") {
				frame = strings.TrimSpace(strings.TrimPrefix(l, "#"))
			}
		}
		fmt.Fprintf(&b, "  %s × %s\n", count, frame)
		shown++
	}
	return b.String()
}
