package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// metricsCost is what CLAWPEN_METRICS_ADDR costs serve: its CPU time per
// stored message and its RSS, with the metrics off and on, over the same
// stream of group messages.
func metricsCost(ctx context.Context, o Options) Section {
	sec := Section{Name: "metrics"}
	if o.HostBin == "" {
		sec.Skipped = "no clawpen binary (HostBin)"
		return sec
	}
	msgs := 10_000
	if o.Quick {
		msgs = 2_000
	}
	addr, err := freeLoopback()
	if err != nil {
		return failed(sec, err)
	}
	for _, c := range []struct {
		name  string
		extra map[string]string
	}{
		{"off", nil},
		{"on", map[string]string{"CLAWPEN_METRICS_ADDR": addr}},
	} {
		o.progress("bench: metrics %s: %d messages through serve", c.name, msgs)
		in, err := serveInbound(ctx, o, 100, msgs, c.extra)
		if err != nil {
			return failed(sec, err)
		}
		sec.Rows = append(sec.Rows,
			Value("host CPU per message, metrics "+c.name, "µs", float64(in.cpuPerMsg.Microseconds())),
			Value("RSS after the messages, metrics "+c.name, "MB", in.rssAfter),
			Value("RSS settled, metrics "+c.name, "MB", in.rssSettled))
	}
	sec.Notes = append(sec.Notes,
		fmt.Sprintf("%s untriggered messages over 100 groups through `clawpen serve` (stored, not answered: the answered path adds a run's counters and two histogram observations); CPU is utime+stime of serve from /proc, in 10 ms ticks", count(msgs)),
		"with metrics on nothing scrapes: the cost is the counting, and the Go and process collectors only cost at a scrape")
	return sec
}

// cpuTime is a process's user + system CPU time (/proc/<pid>/stat, in
// clock ticks of 10 ms: Linux's USER_HZ is 100).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu time: %w", err)
	}
	// The command name may hold spaces: fields start after its ")".
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("cpu time: short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("cpu time: malformed /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// freeLoopback is a loopback address whose port nothing listens on now.
func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
