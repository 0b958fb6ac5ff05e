package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// Nobody is the uid and gid of nobody/nogroup, what a pin can show files
// as when their owner must not appear as the sandbox's own.
const Nobody = 65534

// IDMap is the user namespace of idmapped pins: through such a pin, files
// owned on disk by one host user (disk) appear owned by another uid (view),
// and what a process of the view uid creates lands on disk as the disk
// user. Every other owner appears as nobody (65534) and cannot be written
// as. Docker uses it so that the container's uid 1000 writes as the
// dedicated sandbox user, never as whoever holds uid 1000 on the host.
type IDMap struct {
	ns *os.File
}

// NewIDMap makes the user namespace: its uid_map and gid_map are
// "<disk> <view> 1". A namespace needs a process to be made in: a child
// of this executable, created with CLONE_NEWUSER and stopped by ptrace
// before its first instruction, lives just long enough for its namespace
// to be opened (the fd keeps the namespace alive), then is killed. Needs
// root, like every pin.
func NewIDMap(diskUID, diskGID, viewUID, viewGID int) (*IDMap, error) {
	return newIDMap(diskUID, diskGID, viewUID, viewGID, false)
}

// NewIDMapKeepRoot is NewIDMap that also keeps root as root, for a file
// server that creates each file as root and then gives it to its owner
// (runsc's gofer): without it the create fails (EOVERFLOW), root being
// unmapped. Files root owns on disk then appear as root's, not nobody's.
func NewIDMapKeepRoot(diskUID, diskGID, viewUID, viewGID int) (*IDMap, error) {
	return newIDMap(diskUID, diskGID, viewUID, viewGID, true)
}

func newIDMap(diskUID, diskGID, viewUID, viewGID int, root bool) (*IDMap, error) {
	if diskUID <= 0 || diskGID <= 0 || viewUID <= 0 || viewGID <= 0 {
		return nil, fmt.Errorf("idmap: invalid ids %d:%d -> %d:%d (neither may be root)", diskUID, diskGID, viewUID, viewGID)
	}
	uids := []syscall.SysProcIDMap{{ContainerID: diskUID, HostID: viewUID, Size: 1}}
	gids := []syscall.SysProcIDMap{{ContainerID: diskGID, HostID: viewGID, Size: 1}}
	if root {
		uids = append(uids, syscall.SysProcIDMap{ContainerID: 0, HostID: 0, Size: 1})
		gids = append(gids, syscall.SysProcIDMap{ContainerID: 0, HostID: 0, Size: 1})
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"clawpen-idmap"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: uids,
		GidMappings: gids,
		// Stops at exec: nothing of the child ever runs.
		Ptrace:    true,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("idmap: make a user namespace: %w", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	ns, err := os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/user")
	if err != nil {
		return nil, fmt.Errorf("idmap: open the user namespace: %w", err)
	}
	return &IDMap{ns: ns}, nil
}

// Close releases the namespace (pins made with it keep working).
func (m *IDMap) Close() error {
	if m == nil {
		return nil
	}
	return m.ns.Close()
}
