// Package cgroup holds what every user of the host's cgroups shares: the
// host's own place in them, writing an interface file, and killing and
// removing a cgroup with all it holds. The sandbox backends make their
// cgroups with limits (bwrap's CgroupManager); a bridge tool call is
// contained in a Scope.
package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// removeWait bounds how long Remove waits for a cgroup's processes to die.
const removeWait = 10 * time.Second

// Remove kills every process in the cgroup dir, waits until it is empty
// and removes it. rmdir is os.Remove but where a test replaces it (a tree
// that mimics cgroupfs cannot be removed while it has files).
func Remove(dir string, rmdir func(string) error) error {
	deadline := time.Now().Add(removeWait)
	// v2 since Linux 5.14; elsewhere the loop below kills.
	if err := Write(filepath.Join(dir, "cgroup.kill"), "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("kill cgroup %s: %w", dir, err)
	}
	for {
		err := rmdir(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		// Still populated: kill what is there (v1 has no cgroup.kill, and
		// without a freezer a fork can slip in between reads) and retry.
		if err := Kill(dir); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: processes still in it after %s", dir, removeWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Kill SIGKILLs every process listed in dir/cgroup.procs. A pid is
// signalled through a pidfd opened while the pid is still listed, so a pid
// reused by a process outside the cgroup is never hit.
func Kill(dir string) error {
	pids, err := Procs(dir)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if pid == os.Getpid() {
			continue // a thread of the host that failed to leave (bwrap's Cgroup.Start)
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone
		}
		if still, err := Procs(dir); err == nil && slices.Contains(still, pid) {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
		_ = unix.Close(fd)
	}
	return nil
}

// Procs lists the processes in the cgroup dir (none when it is gone).
func Procs(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s/cgroup.procs: %w", dir, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Own parses /proc/<pid>/cgroup: controller → path ("" is the v2 line).
func Own(file string) (map[string]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	own := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			own[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	return own, nil
}

// Write writes value to an existing interface file, as one write(2).
func Write(p, value string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
