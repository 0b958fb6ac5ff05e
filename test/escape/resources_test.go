package escape

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/test/harness"
)

func init() { register(resourceAttacks) }

// resourceAttacks try to hold more memory, processes or tmpfs space than a
// sandbox may; each pwn check prints how much it held at once. The host
// runs with the default limits.
func resourceAttacks() []attack {
	memMB := strconv.FormatInt(sandbox.DefaultLimits.MemoryBytes>>20, 10)
	tmpMB := strconv.FormatInt(sandbox.DefaultLimits.TmpBytes>>20, 10)
	pids := strconv.Itoa(sandbox.DefaultLimits.Pids)
	// Each attack also prints its cgroup, so the host can check it was the
	// sandbox's own and is gone after the run.
	withCgroup := func(cmd string) string {
		return bash(lines("sed 's/^/CGROUP:/' /proc/self/cgroup", cmd), 150)
	}
	return []attack{
		// Twelve processes of 100 MiB each: under any per-process limit,
		// 1.2 GiB together.
		{name: "memory-several-procs", refusedOK: true, msg: func(e *env) string {
			return withCgroup("./pwn mem-procs 12 100 " + memMB + " MEMPROCS")
		}, want: []string{"MEMPROCS=HELD"}, check: cgroupGone},

		{name: "memory-shm-files", refusedOK: true, msg: func(e *env) string {
			return withCgroup("./pwn hold file:/dev/shm 1536 " + memMB + " SHMFILES")
		}, want: []string{"SHMFILES=HELD"}, check: cgroupGone},

		{name: "memory-memfd", refusedOK: true, msg: func(e *env) string {
			return withCgroup("./pwn hold memfd 1536 " + memMB + " MEMFD")
		}, want: []string{"MEMFD=HELD"}, check: cgroupGone},

		// Segments detached once touched outlive their mapping.
		{name: "memory-sysv-shm", refusedOK: true, msg: func(e *env) string {
			return withCgroup("./pwn hold sysv 1536 " + memMB + " SYSVSHM")
		}, want: []string{"SYSVSHM=HELD"}, check: cgroupGone},

		// /dev is no place to store anything: one stored byte is a breach.
		{name: "dev-fill", msg: func(e *env) string {
			return withCgroup("./pwn hold file:/dev 64 0 DEVFILL")
		}, want: []string{"DEVFILL=HELD"}, check: cgroupGone},

		{name: "tmp-over-size", msg: func(e *env) string {
			return withCgroup("./pwn hold file:/tmp 1024 " + tmpMB + " TMPFILL")
		}, want: []string{"TMPFILL=HELD"}, check: cgroupGone},

		// Single-threaded sleepers, all held at once; the agent itself, the
		// shell and pwn take a few of the pids.
		{name: "fork-bomb-pids", limitOK: true, msg: func(e *env) string {
			return withCgroup("./pwn forkbomb 600 " + pids + " FORKBOMB; echo STILL-FORKS=$(/bin/echo yes)")
		}, want: []string{"FORKBOMB=HELD", "STILL-FORKS=yes"}, check: cgroupGone},
	}
}

// cgroupGone reads the memory cgroup the sandbox reported (CGROUP: lines),
// checks that it was the sandbox's own and not the host's, and that the host
// removed it after the run (or, where serve keeps it for the group's next
// sandbox, emptied it of the attack).
func cgroupGone(t *testing.T, e *env, out string) []string {
	inside, ok := reportedCgroup(out)
	if !ok && harness.Backend() != "gvisor" {
		if strings.Contains(out, refusedText) {
			return nil // killed with the run: nothing reported
		}
		return []string{inconclusive + "the sandbox reported no memory cgroup"}
	}
	var dirs []string
	kept := false // the backend may keep the cgroup for the group's next sandbox
	switch harness.Backend() {
	case "gvisor":
		// gVisor's kernel shows the sandbox no cgroup of the host's (it
		// mounts no cgroupfs; /proc/self/cgroup is empty). On the host,
		// the sandbox's cgroup is /sys/fs/cgroup/<controller>/<prefix>/<the
		// container>, and the host's log names each run's container.
		if ok && inside.path != "/" {
			return []string{"the sandbox sees a cgroup tree that is not its own: " + inside.path}
		}
		names := ranCgroups(e.h.Stderr.String(), e.folder, "container")
		if len(names) == 0 {
			return []string{inconclusive + "the host's log names no container of a run of " + e.folder}
		}
		for _, n := range names {
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", "memory", "*", n), filepath.Join("/sys/fs/cgroup", "pids", "*", n))
		}
	case "docker":
		// The engine's own cgroup namespace: the path is the host's.
		dirs = []string{hostCgroupDir(inside.ctrl, inside.path)}
	default:
		// bwrap starts in the sandbox's cgroup, which is the root of the
		// sandbox's cgroup namespace: it sees "/", nothing of the host's
		// tree. The host's log names the cgroup of each sandbox that took a
		// job of this group.
		if inside.path != "/" {
			return []string{"the sandbox sees a cgroup tree that is not its own: " + inside.path}
		}
		own, ok := procCgroup(fmt.Sprintf("/proc/%d/cgroup", e.hostPID), inside.ctrl)
		if !ok {
			return []string{inconclusive + "cannot read the host's cgroup"}
		}
		names := ranCgroups(e.h.Stderr.String(), e.folder, "cgroup")
		if len(names) == 0 {
			return []string{inconclusive + "the host's log names no cgroup of a run of " + e.folder}
		}
		for _, n := range names {
			dirs = append(dirs, filepath.Join(hostCgroupDir(inside.ctrl, own), "*", n))
		}
		// serve keeps a group's emptied cgroup for the group's next
		// sandbox (bwrap's ReuseCgroups), which may already be in it
		// (warm, waiting: bwrap and the agent): what must be gone from it
		// is every other process, the attack's.
		kept = true
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, dir := range dirs {
		for {
			left, _ := filepath.Glob(dir)
			if len(left) == 0 || kept && !holdsAttack(left) {
				break
			}
			if time.Now().After(deadline) {
				if kept {
					return []string{"a process of the attack is still in the sandbox's cgroup " + dir + " after the run"}
				}
				return []string{"the sandbox's cgroup " + dir + " still exists after the run"}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// holdsAttack reports whether a process other than a waiting sandbox's
// (bwrap, the agent) is in any of the cgroup directories dirs.
func holdsAttack(dirs []string) bool {
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue // removed meanwhile
		}
		for _, pid := range strings.Fields(string(b)) {
			exe, err := os.Readlink(filepath.Join("/proc", pid, "exe"))
			if err != nil {
				continue // gone meanwhile
			}
			if base := filepath.Base(exe); base != "bwrap" && base != "clawpen-agent" {
				return true
			}
		}
	}
	return false
}

// ranCgroups are, from the host's log, the cgroups of the sandboxes that
// took a job of folder (a warm sandbox still waiting has one too): the
// backend's "sandbox started" line names each by key (bwrap: cgroup,
// gVisor: container).
func ranCgroups(log, folder, key string) []string {
	cgroups := map[string]string{} // invocation → cgroup
	for _, m := range regexp.MustCompile(`msg="sandbox started" invocation=(\S+) group=(\S+) .*`+key+`=(\S+)`).FindAllStringSubmatch(log, -1) {
		if m[2] == folder {
			cgroups[m[1]] = m[3]
		}
	}
	var names []string
	for _, m := range regexp.MustCompile(`msg="sandbox start" group=(\S+) invocation=(\S+)`).FindAllStringSubmatch(log, -1) {
		if n, ok := cgroups[m[2]]; ok && m[1] == folder {
			names = append(names, n)
		}
	}
	return names
}

type cgroupLine struct{ ctrl, path string }

// reportedCgroup finds the memory controller's line (v1) or the unified
// one (v2) among the CGROUP: lines.
func reportedCgroup(out string) (cgroupLine, bool) {
	var v2 cgroupLine
	found := false
	for _, l := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), "CGROUP:")
		if !ok {
			continue
		}
		parts := strings.SplitN(rest, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				return cgroupLine{"memory", parts[2]}, true
			}
		}
		if parts[1] == "" {
			v2, found = cgroupLine{"", parts[2]}, true
		}
	}
	return v2, found
}

func procCgroup(file, ctrl string) (string, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", false
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == ctrl {
				return parts[2], true
			}
		}
		if ctrl == "" && parts[1] == "" {
			return parts[2], true
		}
	}
	return "", false
}

func hostCgroupDir(ctrl, p string) string {
	if ctrl == "" {
		return filepath.Join("/sys/fs/cgroup", p)
	}
	return filepath.Join("/sys/fs/cgroup", ctrl, p)
}
