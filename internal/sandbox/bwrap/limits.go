package bwrap

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// rlimit is one resource limit set on every sandbox.
type rlimit struct {
	name     string
	resource int
	value    uint64
}

// rlimits are what the cgroup does not cover. Memory and processes are the
// cgroup's alone: RLIMIT_AS counted address space per process (several
// processes, tmpfs, memfd and SysV shm went past it) and broke programs that
// reserve address space without using it (Go, V8, the JVM); RLIMIT_NPROC
// counted the run-as user's processes in every sandbox together.
func (b *Backend) rlimits() []rlimit {
	return []rlimit{
		{"RLIMIT_FSIZE", unix.RLIMIT_FSIZE, sandbox.FileSizeLimit},
		{"RLIMIT_NOFILE", unix.RLIMIT_NOFILE, sandbox.OpenFilesLimit},
		{"RLIMIT_CORE", unix.RLIMIT_CORE, 0},
	}
}

// release finds bwrap's namespace init, sets its rlimits, and then lets it
// go on. The init has built the view and waits on --block-fd before it
// forks the command, so every sandboxed process inherits them; setting them
// from here with prlimit(2) saves exec'ing prlimit(1) before bwrap (about
// 1.5 ms a run). Rlimits are only ever lowered, to at most the init's
// current hard limit, so no capability is needed (see asRunAsUser). The
// init is in the sandbox's cgroup since its birth (Cgroup.Start).
//
// When it cannot, it kills the sandbox, whose init would wait for ever (see
// gate), and says why. The init is returned when found, released or not.
func (b *Backend) release(cmd *exec.Cmd, g *gate) (*nsProcess, error) {
	ns := watchInit(g.info, cmd.Process.Pid)
	err := errors.New("bwrap made no sandbox")
	if ns != nil {
		err = b.free(ns, g.block)
	}
	if err != nil {
		_ = killGroup(cmd)
	}
	return ns, err
}

func (b *Backend) free(ns *nsProcess, block *os.File) error {
	if b.beforeRelease != nil {
		if err := b.beforeRelease(); err != nil {
			return err
		}
	}
	if err := b.asRunAsUser(func() error { return b.setLimits(ns) }); err != nil {
		return err
	}
	// The pid was checked against the pidfd when the init was found; had the
	// init died since, the limits might have gone to a reused pid.
	if ns.exited() {
		return errors.New("the sandbox's namespace init exited before its limits were set")
	}
	if _, err := block.Write([]byte{1}); err != nil {
		return fmt.Errorf("release the sandbox: %w", err)
	}
	return nil
}

func (b *Backend) setLimits(ns *nsProcess) error {
	for _, l := range b.rlimits() {
		var cur unix.Rlimit
		if err := unix.Prlimit(ns.pid, l.resource, nil, &cur); err != nil {
			return fmt.Errorf("read %s of the sandbox: %w", l.name, err)
		}
		v := min(l.value, cur.Max)
		if err := unix.Prlimit(ns.pid, l.resource, &unix.Rlimit{Cur: v, Max: v}, nil); err != nil {
			return fmt.Errorf("set %s=%d on the sandbox: %w", l.name, v, err)
		}
	}
	return nil
}

// asRunAsUser runs f with the run-as user's real uid and gid. prlimit(2) on
// another process needs the caller's real ids to match the target's, or
// CAP_SYS_RESOURCE over the sandbox's user namespace, which a root host in a
// container often lacks. A host running as that user already matches. A root
// host changes the real ids of one locked OS thread only (raw
// setresuid/setresgid; effective and saved ids stay 0, so its capabilities
// are untouched) and restores them before unlocking. The thread is never left
// to exit: a dying thread fires the Pdeathsig of every child it started,
// which would kill other sandboxes.
func (b *Backend) asRunAsUser(f func() error) error {
	if !b.switchUser {
		return f()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		const keep = ^uintptr(0) // -1: leave unchanged
		setReal := func(uid, gid int) error {
			if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), keep, keep); e != 0 {
				return fmt.Errorf("set real gid %d: %w", gid, e)
			}
			if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), keep, keep); e != 0 {
				return fmt.Errorf("set real uid %d: %w", uid, e)
			}
			return nil
		}
		hostUID, hostGID := unix.Getuid(), unix.Getgid()
		err := setReal(b.uid, b.gid)
		if err == nil {
			err = f()
		}
		if rerr := setReal(hostUID, hostGID); rerr != nil {
			// Cannot happen with euid 0; should it, this thread must never
			// run anything else, nor exit (see above).
			done <- fmt.Errorf("restore the host's ids on a thread: %w", rerr)
			select {}
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// exited reports, without waiting, whether the process has exited. A poll
// interrupted by a signal (the Go runtime's preemption signal, under load) is
// asked again: taken as "exited" it failed a healthy sandbox. Any other error
// counts as exited, which refuses the run.
func (n *nsProcess) exited() bool {
	fds := []unix.PollFd{{Fd: int32(n.pidfd), Events: unix.POLLIN}}
	for {
		nready, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err != nil || nready > 0
	}
}
