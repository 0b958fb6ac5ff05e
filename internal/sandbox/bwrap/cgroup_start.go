package bwrap

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/clawpen/clawpen/internal/cgroup"
)

// Start starts cmd with its first process already inside the cgroup, so
// that nothing it or its descendants run is ever outside the cgroup's
// limits, whenever the host may die. start is what starts cmd (cmd.Start,
// or a wrapper that must run on the same thread); it is called once.
//
// v2: the kernel places the child at its birth (clone3's
// CLONE_INTO_CGROUP, SysProcAttr.UseCgroupFD). v1 has no such flag, and a
// child is born in the cgroups of the thread that forks it: a locked OS
// thread joins the cgroup (each hierarchy's tasks file),
// forks (Go's forkExec clones on the calling thread), and moves back to the
// host's own cgroup. The thread is in the cgroup only meanwhile; what it
// costs is in BenchmarkStartInCgroup.
func (c *Cgroup) Start(cmd *exec.Cmd, start func(*exec.Cmd) error) error {
	if c.m.mode == CgroupV2 {
		dir, err := os.Open(c.dirs[0])
		if err != nil {
			return fmt.Errorf("open cgroup %s: %w", c.dirs[0], err)
		}
		defer dir.Close()
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(dir.Fd())
		return start(cmd)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		joined, err := moveThread(c.dirs)
		if err == nil {
			err = start(cmd)
		}
		if _, berr := moveThread(c.hostDirs()[:joined]); berr != nil {
			// Cannot happen as root; should it, this thread (in the sandbox's
			// cgroup, where Remove kills what it finds, the host excepted)
			// must never run anything else.
			done <- fmt.Errorf("move a host thread back out of the sandbox's cgroup: %w", berr)
			select {}
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// moveThread moves the calling thread into each of dirs, in order, and
// says how many it joined. It writes 0, which names the caller: the kernel
// then moves it without the global lock a move of another task takes (a
// read-copy-update grace period each, milliseconds on a busy host).
func moveThread(dirs []string) (int, error) {
	for i, d := range dirs {
		if err := cgroup.Write(filepath.Join(d, "tasks"), "0"); err != nil {
			return i, fmt.Errorf("move a host thread into cgroup %s: %w", d, err)
		}
	}
	return len(dirs), nil
}

// hostDirs are the host's own cgroups, in the order of c.dirs: the parents
// of the instance directories (v1 leaves the host where it started).
func (c *Cgroup) hostDirs() []string {
	dirs := make([]string, len(c.m.bases))
	for i, b := range c.m.bases {
		dirs[i] = filepath.Dir(b)
	}
	return dirs
}
