package bwrap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// KillOrphans kills the sandboxes a crashed host left: PID-namespace inits
// of bwrap, running as the dedicated sandbox user, whose bwrap is gone (they
// were reparented, to PID 1 or a subreaper). A live sandbox's init has its
// bwrap for parent until it ends (a host reparents and kills it then). One caught by the crash while it waited for
// its limits (on --block-fd) would otherwise stay, holding its view's open
// folders. Killing an init ends everything in its namespace. A host running
// sandboxes as its own user shares that user with whatever else it runs
// (Flatpak's bwrap, say): nothing is killed then.
func (b *Backend) KillOrphans() (int, error) {
	if !b.switchUser {
		return 0, nil
	}
	return killOrphanInits("/proc", b.uid)
}

func killOrphanInits(proc string, uid int) (int, error) {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	n := 0
	var errs []error
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if !orphanInit(proc, e.Name(), uid) {
			continue
		}
		// A pidfd, then a second look: the pid cannot be reused between.
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone
		}
		if orphanInit(proc, e.Name(), uid) {
			if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("kill orphaned sandbox %d: %w", pid, err))
			} else {
				n++
			}
		}
		_ = unix.Close(fd)
	}
	return n, errors.Join(errs...)
}

// orphanInit reports whether process pid is a bwrap PID-namespace init of
// uid whose parent is not bwrap.
func orphanInit(proc, pid string, uid int) bool {
	st, ok := readStatus(filepath.Join(proc, pid))
	if !ok || st.name != "bwrap" || st.uid != uid || len(st.nspid) < 2 || st.nspid[len(st.nspid)-1] != "1" {
		return false
	}
	parent, ok := readStatus(filepath.Join(proc, strconv.Itoa(st.ppid)))
	return !ok || parent.name != "bwrap"
}

type procStatus struct {
	name  string
	ppid  int
	uid   int
	nspid []string
}

// readStatus reads the fields of /proc/<pid>/status orphanInit needs.
func readStatus(dir string) (procStatus, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return procStatus{}, false
	}
	st := procStatus{ppid: -1, uid: -1}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		switch k {
		case "Name":
			st.name = f[0]
		case "PPid":
			st.ppid, _ = strconv.Atoi(f[0])
		case "Uid":
			st.uid, _ = strconv.Atoi(f[0])
		case "NSpid":
			st.nspid = f
		}
	}
	return st, st.name != ""
}
