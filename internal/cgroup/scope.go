package cgroup

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// unifiedMounts are where the cgroup v2 hierarchy is mounted: on its own
// (unified hosts), or beside the v1 hierarchies (hybrid hosts).
var unifiedMounts = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}

// fixScope is what makes scopes possible where they are not.
const fixScope = "run clawpen as root or in a cgroup delegated to its user (Delegate=yes), " +
	"on Linux 5.7 or later with the cgroup v2 hierarchy mounted (unified or hybrid)"

// A Scope is a cgroup made only to hold a set of processes, so that all of
// them, however they detach (setsid, a double fork), are killed together.
// It has no controllers and no limits, so it needs the cgroup v2 hierarchy
// only, which hybrid hosts also mount, and not the v1 controllers. Its
// processes are born in it (CLONE_INTO_CGROUP, through FD), never moved
// there, so none runs outside it first.
type Scope struct {
	dir string
	fd  int // the directory, open for CLONE_INTO_CGROUP; -1 once closed
}

// NewScope makes a scope named prefix-<random> under the caller's own
// cgroup v2 cgroup.
func NewScope(prefix string) (*Scope, error) {
	return newScope(unifiedMounts, "/proc/self/cgroup", prefix)
}

func newScope(mounts []string, procCgroup, prefix string) (*Scope, error) {
	root := ""
	for _, m := range mounts {
		var st unix.Statfs_t
		if unix.Statfs(m, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			root = m
			break
		}
	}
	if root == "" {
		return nil, fmt.Errorf("no cgroup v2 hierarchy at %s (fix: %s)", strings.Join(mounts, " or "), fixScope)
	}
	own, err := Own(procCgroup)
	if err != nil {
		return nil, fmt.Errorf("read the host's cgroup: %w", err)
	}
	p, ok := own[""]
	if !ok {
		return nil, fmt.Errorf("no cgroup v2 line in %s (fix: %s)", procCgroup, fixScope)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	dir := filepath.Join(root, filepath.FromSlash(path.Clean("/"+p)), prefix+"-"+hex.EncodeToString(b))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make cgroup %s: %w (fix: %s)", dir, err, fixScope)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("open cgroup %s: %w", dir, err)
	}
	return &Scope{dir: dir, fd: fd}, nil
}

// FD is the scope's directory, for SysProcAttr.CgroupFD (with UseCgroupFD):
// a process started so is born in the scope. Valid until Close.
func (s *Scope) FD() int { return s.fd }

// Dir is the scope's directory.
func (s *Scope) Dir() string { return s.dir }

// Kill SIGKILLs every process in the scope, at once where the kernel has
// cgroup.kill (5.14), else each one listed now (Close repeats it until
// none is left).
func (s *Scope) Kill() error {
	err := Write(filepath.Join(s.dir, "cgroup.kill"), "1")
	if errors.Is(err, os.ErrNotExist) {
		return Kill(s.dir)
	}
	return err
}

// Close kills every process in the scope, waits until they are gone and
// removes it.
func (s *Scope) Close() error {
	if s.fd < 0 {
		return nil
	}
	_ = unix.Close(s.fd)
	s.fd = -1
	return Remove(s.dir, os.Remove)
}
