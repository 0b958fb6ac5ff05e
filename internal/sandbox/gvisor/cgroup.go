package gvisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// ownedControllers are the v1 controllers whose cgroup the host makes and
// limits itself before runsc starts, rather than leaving them to runsc.
// runsc removes every cgroup it made as soon as the sandbox ends, before
// the host can read what the kernel counted there (an OOM kill, a refused
// fork); a cgroup that already exists it joins, leaves as it is and does
// not remove. The host reads the counters (reached) and then removes it
// (removeCgroup). runsc still makes, limits and removes the others (cpu).
var ownedControllers = []string{"memory", "pids"}

// makeCgroup makes the container's memory and pids cgroups with the
// limits of lim. Every file is written or the run does not start: a
// cgroup runsc found already made would be joined unlimited.
func (g *Backend) makeCgroup(id string, lim sandbox.Limits) (err error) {
	defer func() {
		if err != nil {
			g.removeCgroup(id)
		}
	}()
	mem := strconv.FormatInt(lim.MemoryBytes, 10)
	files := map[string][][2]string{
		// The memory limit first: memsw may not be below it.
		"memory": {{"memory.limit_in_bytes", mem}, {"memory.memsw.limit_in_bytes", mem}},
		"pids":   {{"pids.max", strconv.Itoa(hostPids(lim.Pids))}},
	}
	for _, c := range ownedControllers {
		dir := filepath.Join("/sys/fs/cgroup", c, g.cfg.Prefix, id)
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return fmt.Errorf("gvisor cgroup: %w", err)
		}
		// Mkdir, not MkdirAll: a cgroup left by someone else is not
		// taken over with whatever limits it has.
		if err := os.Mkdir(dir, 0o755); err != nil {
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("gvisor cgroup %s already exists", dir)
			}
			return fmt.Errorf("gvisor cgroup: %w", err)
		}
		for _, f := range files[c] {
			if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0o644); err != nil {
				return fmt.Errorf("gvisor cgroup limit %s: %w", f[0], err)
			}
		}
	}
	return nil
}

// hostPids is the pids limit of the sandbox's cgroup on the host, for a
// profile's limit of pids. The cgroup holds runsc's own threads too: the
// Sentry's, the gofer's and, under the ptrace platform, a stub process of
// several threads per agent process (about ten host pids per sleeping
// process here, runsc 2022-12-19). gVisor enforces no process limit of its
// own, so this bounds the host's pids, and the agent gets roughly, not
// exactly, the profile's number of processes; past it the whole sandbox
// ends rather than a fork failing.
func hostPids(pids int) int { return 64 + 8*pids }
