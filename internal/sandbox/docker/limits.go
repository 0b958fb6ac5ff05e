package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// reached is the cgroup limit the kernel enforced on the container, as the
// host knows it once the container has exited: memory from the engine's
// OOMKilled (or its oom event, see oomEvent), processes from the watch
// (procs: it saw a refused fork). Memory wins when both happened: a killed
// process is what ends a run.
func (b *Backend) reached(ctx context.Context, id string, started time.Time, killed, procs bool, log *slog.Logger) sandbox.Limit {
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	in, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	switch {
	case err != nil:
		log.Warn("inspect sandbox container", "err", err)
	case in.Container.State == nil:
	case in.Container.State.OOMKilled:
		return sandbox.MemoryLimit
	case killed && b.oomEvent(ctx, id, started, log):
		return sandbox.MemoryLimit
	}
	if procs {
		return sandbox.ProcessLimit
	}
	return ""
}

// oomSettle bounds the wait for an oom event that follows the exit.
const oomSettle = time.Second

// oomEvent says whether the engine logged an oom event for the container.
// containerd delivers a task's oom and exit events apart; when the exit is
// handled first, Docker 20.10 never sets OOMKilled, but it still logs the
// oom event. Asked only for a run SIGKILLed by something other than the
// host, so a run that ends normally waits for nothing.
func (b *Backend) oomEvent(ctx context.Context, id string, started time.Time, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(ctx, oomSettle+engineTimeout)
	defer cancel()
	until := time.Now().Add(oomSettle)
	ev := b.cli.Events(ctx, client.EventsListOptions{
		Since:   fmt.Sprintf("%d.%09d", started.Unix(), started.Nanosecond()),
		Until:   fmt.Sprintf("%d.%09d", until.Unix(), until.Nanosecond()),
		Filters: make(client.Filters).Add("container", id).Add("event", "oom"),
	})
	select {
	case <-ev.Messages:
		return true
	case err := <-ev.Err:
		if err != nil && !errors.Is(err, io.EOF) {
			log.Warn("read the engine's oom events", "err", err)
		}
		return false
	}
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
// cgroup's pids.events ("max N") while the container runs, every pidsPoll
// (on cgroup v1 the kernel wakes no poll on that file; seen on Linux
// 6.18), and once more when stopped. A container that refuses a fork and
// is gone within pidsPoll may go unnoticed.
type pidsWatch struct {
	stopc chan struct{}
	done  chan struct{} // closed when the watch has ended; hit is set
	hit   bool
}

// pidsPoll is how often a watch reads pids.events.
const pidsPoll = 100 * time.Millisecond

// watchPids starts watching the cgroup of container id, whose first
// process is pid. nil when its cgroup cannot be found.
func watchPids(pid int, id string, log *slog.Logger) *pidsWatch {
	events, err := pidsEventsFile(pid, id)
	if err != nil {
		log.Debug("the sandbox's process limit is not watched", "err", err)
		return nil
	}
	w := &pidsWatch{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(pidsPoll)
		defer tick.Stop()
		for stopped := false; ; {
			// The watch ends at the first refused fork, or with the cgroup.
			if n, err := readMax(events); err != nil || n > 0 {
				w.hit = err == nil
				return
			}
			if stopped {
				return
			}
			select {
			case <-tick.C:
			case <-w.stopc:
				stopped = true
			}
		}
	}()
	return w
}

// stop ends the watch and reports whether the limit was reached.
func (w *pidsWatch) stop() bool {
	close(w.stopc)
	<-w.done
	return w.hit
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

// readMax reads the "max" count of a pids.events file.
func readMax(events string) (int64, error) {
	b, err := os.ReadFile(events)
	if err != nil {
		return 0, err
	}
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if v, ok := bytes.CutPrefix(line, []byte("max ")); ok {
			return strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		}
	}
	return 0, errors.New("pids.events has no max line")
}
