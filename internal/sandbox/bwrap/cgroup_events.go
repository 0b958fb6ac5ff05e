package bwrap

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// Reached says which limit the kernel enforced on the cgroup's processes so
// far, from the kernel's own counters: memory when the OOM killer killed one
// of them (v2 memory.events oom_kill; v1 memory.oom_control oom_kill), the
// process limit when a fork or a new thread was refused (pids.events max,
// both versions). Memory wins when both happened: a killed process is what
// ends a run. Read it before Remove or Release.
func (c *Cgroup) Reached() (sandbox.Limit, error) {
	n, err := c.counters()
	if err != nil {
		return "", err
	}
	// A reused cgroup (Take) counts from where its last sandbox left it.
	switch {
	case n.oomKills > c.base.oomKills:
		return sandbox.MemoryLimit, nil
	case n.pidsMax > c.base.pidsMax:
		return sandbox.ProcessLimit, nil
	}
	return "", nil
}

// counter reads "key N" from the controller's file of the cgroup.
func (c *Cgroup) counter(ctrl, file, key string) (int64, error) {
	for _, ct := range c.m.ctrls {
		if ct.name != ctrl {
			continue
		}
		p := filepath.Join(ct.base, c.name, file)
		b, err := os.ReadFile(p)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", p, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			k, v, _ := bytes.Cut(sc.Bytes(), []byte{' '})
			if string(k) == key {
				n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
				if err != nil {
					return 0, fmt.Errorf("%s: %q: %w", p, sc.Text(), err)
				}
				return n, nil
			}
		}
		return 0, fmt.Errorf("%s has no %q line", p, key)
	}
	return 0, fmt.Errorf("no %s controller", ctrl)
}
