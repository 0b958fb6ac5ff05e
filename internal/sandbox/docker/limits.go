package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// reached is the cgroup limit the kernel enforced on the container, as the
// host knows it once the container has exited: memory from the engine's
// OOMKilled, processes from the watch (nil: not watched). Memory wins when
// both happened: a killed process is what ends a run.
func (b *Backend) reached(ctx context.Context, id string, pids *pidsWatch, log *slog.Logger) sandbox.Limit {
	procs := pids != nil && pids.stop()
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	in, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	switch {
	case err != nil:
		log.Warn("inspect sandbox container", "err", err)
	case in.Container.State != nil && in.Container.State.OOMKilled:
		return sandbox.MemoryLimit
	}
	if procs {
		return sandbox.ProcessLimit
	}
	return ""
}

// watchPidsOf finds the running container's first process and watches its
// cgroup (see pidsWatch); nil when it cannot. A host in a container sees
// other pids than the engine's, so it does not try.
func (b *Backend) watchPidsOf(ctx context.Context, id string, log *slog.Logger) *pidsWatch {
	if b.cfg.HostRoot != "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	in, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil || in.Container.State == nil || in.Container.State.Pid <= 0 {
		log.Debug("the sandbox's process limit is not watched", "err", err)
		return nil
	}
	return watchPids(in.Container.State.Pid, id, log)
}

// pidsWatch notes whether the kernel refused a container's process a fork
// at its process limit. The engine does not say, and the container's cgroup
// is removed as soon as the container exits, so the host reads the
// cgroup's pids.events ("max N") while the container runs: when the kernel
// wakes a poll on the file (v2, on each change) and every pidsPoll (v1
// wakes nobody, seen on Linux 6.18). A container that refuses a fork and
// exits within pidsPoll may go unnoticed.
type pidsWatch struct {
	// The watch stops at the first refused fork: one is all it reports.
	hit  atomic.Bool
	wake *os.File      // closed to stop the watch
	done chan struct{} // closed when the watch has stopped
}

// pidsPoll is how often a watch reads pids.events without being woken.
const pidsPoll = 100 * time.Millisecond

// watchPids starts watching the cgroup of container id, whose first
// process is pid. nil when its cgroup cannot be found.
func watchPids(pid int, id string, log *slog.Logger) *pidsWatch {
	events, err := pidsEventsFile(pid, id)
	if err != nil {
		log.Debug("the sandbox's process limit is not watched", "err", err)
		return nil
	}
	fd, err := unix.Open(events, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		log.Debug("the sandbox's process limit is not watched", "err", err)
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		_ = unix.Close(fd)
		return nil
	}
	pw := &pidsWatch{wake: w, done: make(chan struct{})}
	go func() {
		defer close(pw.done)
		defer unix.Close(fd)
		defer r.Close()
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}, {Fd: int32(r.Fd()), Events: unix.POLLIN}}
		for stopped := false; ; stopped = fds[1].Revents != 0 {
			// Each read also re-arms the poll; a last one follows stop.
			if n, err := readMax(fd); err != nil || n > 0 {
				pw.hit.Store(err == nil)
				return
			}
			if stopped {
				return
			}
			if _, err := unix.Poll(fds, int(pidsPoll.Milliseconds())); err != nil && !errors.Is(err, unix.EINTR) {
				return
			}
		}
	}()
	return pw
}

// stop ends the watch and reports whether the limit was reached.
func (w *pidsWatch) stop() bool {
	_ = w.wake.Close()
	<-w.done
	return w.hit.Load()
}

// pidsEventsFile is the pids.events file of the cgroup of container id,
// which process pid is in: a cgroup whose path does not name the container
// is not taken (the pid was another process's by then).
func pidsEventsFile(pid int, id string) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	v2 := false
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		v2 = true
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.Contains(parts[2], id) {
			continue
		}
		switch {
		case v2 && parts[0] == "0" && parts[1] == "":
			return filepath.Join("/sys/fs/cgroup", parts[2], "pids.events"), nil
		case !v2 && parts[1] == "pids":
			return filepath.Join("/sys/fs/cgroup/pids", parts[2], "pids.events"), nil
		}
	}
	return "", fmt.Errorf("no pids cgroup of container %.12s for pid %d", id, pid)
}

// readMax reads the "max" count of the pids.events file open at fd.
func readMax(fd int) (int64, error) {
	buf := make([]byte, 256)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil {
		return 0, err
	}
	for _, line := range bytes.Split(buf[:n], []byte{'\n'}) {
		if v, ok := bytes.CutPrefix(line, []byte("max ")); ok {
			return strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		}
	}
	return 0, errors.New("pids.events has no max line")
}
