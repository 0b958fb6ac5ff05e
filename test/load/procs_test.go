package load

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procID names a process across pid reuse: its pid and start time (clock
// ticks since boot, field 22 of /proc/<pid>/stat).
type procID struct {
	pid   int
	start uint64
	cmd   string
	state string // R, S, Z …
	comm  string
}

// procStat reads a process's parent and start time.
func procStat(pid int) (ppid int, start uint64, ok bool) {
	ppid, start, _, _, ok = procStat2(pid)
	return ppid, start, ok
}

// procStat2 also returns the state and the command name.
func procStat2(pid int) (ppid int, start uint64, state, comm string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, "", "", false
	}
	// The command name is in parentheses and may hold spaces: fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	j := bytes.IndexByte(b, '(')
	if i < 0 || j < 0 || j > i {
		return 0, 0, "", "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, 0, "", "", false
	}
	// f[0] is field 3 (state), so field n is f[n-3].
	pp, err1 := strconv.Atoi(f[1])
	st, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, "", "", false
	}
	return pp, st, f[0], string(b[j+1 : i]), true
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// descendants lists every living process below root (its sandboxes:
// bwrap, bwrap's namespace init, the agent and whatever the agent runs).
func descendants(root int) []procID {
	ents, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	info := map[int]procID{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		pp, st, state, comm, ok := procStat2(pid)
		if !ok {
			continue
		}
		children[pp] = append(children[pp], pid)
		info[pid] = procID{pid: pid, start: st, state: state, comm: comm}
	}
	var out []procID
	queue := append([]int(nil), children[root]...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		pi := info[p]
		pi.cmd = cmdline(p)
		out = append(out, pi)
		queue = append(queue, children[p]...)
	}
	return out
}

// zombies splits ps into living processes and zombies (exited, not reaped).
func zombies(ps []procID) (living, dead []procID) {
	for _, p := range ps {
		if p.state == "Z" {
			dead = append(dead, p)
		} else {
			living = append(living, p)
		}
	}
	return living, dead
}

// alive returns the processes of ps that still exist (same pid, same start).
func alive(ps []procID) []procID {
	var out []procID
	for _, p := range ps {
		if _, st, ok := procStat(p.pid); ok && st == p.start {
			out = append(out, p)
		}
	}
	return out
}

// hostStats are the serve process's resources.
type hostStats struct {
	FDs, Threads int
	RSSKiB       int
	Goroutines   int // from the debug endpoint; 0: not read
}

func (s hostStats) String() string {
	return fmt.Sprintf("goroutines %d, fds %d, threads %d, RSS %.1f MiB", s.Goroutines, s.FDs, s.Threads, float64(s.RSSKiB)/1024)
}

func statsOf(pid int) (hostStats, error) {
	var s hostStats
	fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		return s, fmt.Errorf("fds of %d: %w", pid, err)
	}
	s.FDs = len(fds)
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return s, fmt.Errorf("status of %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.Atoi(f[0])
		switch k {
		case "Threads":
			s.Threads = n
		case "VmRSS":
			s.RSSKiB = n
		}
	}
	return s, nil
}
