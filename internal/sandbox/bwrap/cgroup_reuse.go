package bwrap

import (
	"errors"
	"fmt"

	"github.com/clawpen/clawpen/internal/cgroup"
)

// A group's sandboxes run one after another, each in a cgroup of its own
// with the same limits. Making one is a mkdir and the limit writes in each
// hierarchy (three on v1), removing it an rmdir each, and the kernel's
// setting up and tearing down of a memory cgroup is the dearer part of
// both. So a sandbox's cgroup, once the sandbox is gone, is kept for that
// group's next sandbox, when it is provably empty: no process is left in
// it in any hierarchy, so none can come back (only a member forks into a
// cgroup, and the host moves nothing else there). Its event counters,
// which the kernel never resets, are read then, and the next run's
// Reached counts only what happened after. Anything else (a process
// still there, a counter that cannot be read, other limits) gets a fresh
// cgroup, and what is not kept is killed and removed as before.

// maxIdleCgroups bounds the cgroups kept between sandboxes: one per
// recently active group.
const maxIdleCgroups = 16

// counters are a cgroup's event counters at some moment (see Reached).
type counters struct{ oomKills, pidsMax int64 }

// Take returns the cgroup that key's last sandbox left (see Release) when
// it has the limits lim, else a new one (New). key "" is never kept.
func (m *CgroupManager) Take(key string, lim cgroupLimits) (*Cgroup, error) {
	if key != "" {
		m.idleMu.Lock()
		cg := m.idle[key]
		delete(m.idle, key)
		m.idleMu.Unlock()
		if cg != nil {
			if cg.lim == lim {
				return cg, nil
			}
			_ = cg.Remove() // other limits: a fresh one is simpler than rewriting them in order
		}
	}
	cg, err := m.New(lim)
	if err != nil {
		return nil, err
	}
	cg.key = key
	return cg, nil
}

// Release ends the cgroup's use by a sandbox that is gone: kept for its
// key's next sandbox when it is empty, else killed and removed (Remove).
func (c *Cgroup) Release() error {
	if c.key == "" || !c.empty() {
		return c.Remove()
	}
	// Empty: nothing can change the counters any more.
	now, err := c.counters()
	if err != nil {
		return c.Remove()
	}
	c.base = now
	m := c.m
	m.idleMu.Lock()
	old, had := m.idle[c.key]
	if m.closed || (!had && len(m.idle) >= maxIdleCgroups) {
		m.idleMu.Unlock()
		return c.Remove()
	}
	m.idle[c.key] = c
	m.idleMu.Unlock()
	if had {
		return old.Remove()
	}
	return nil
}

// empty reports whether no process is in the cgroup in any hierarchy; an
// error counts as not empty.
func (c *Cgroup) empty() bool {
	for _, d := range c.dirs {
		pids, err := cgroup.Procs(d)
		if err != nil || len(pids) > 0 {
			return false
		}
	}
	return true
}

// counters reads the event counters Reached looks at.
func (c *Cgroup) counters() (counters, error) {
	var n counters
	var err error
	if n.oomKills, err = c.counter("memory", c.m.oomFile(), "oom_kill"); err != nil {
		return n, err
	}
	if n.pidsMax, err = c.counter("pids", "pids.events", "max"); err != nil {
		return n, err
	}
	return n, nil
}

// oomFile is where the memory controller counts its OOM kills.
func (m *CgroupManager) oomFile() string {
	if m.mode == CgroupV1 {
		return "memory.oom_control"
	}
	return "memory.events"
}

// dropIdle removes the kept cgroups and keeps no more (Close).
func (m *CgroupManager) dropIdle() error {
	m.idleMu.Lock()
	m.closed = true
	idle := m.idle
	m.idle = nil
	m.idleMu.Unlock()
	var errs []error
	for key, cg := range idle {
		if err := cg.Remove(); err != nil {
			errs = append(errs, fmt.Errorf("kept cgroup of %s: %w", key, err))
		}
	}
	return errors.Join(errs...)
}
