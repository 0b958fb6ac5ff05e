// Package pin fixes a bind source to the file or directory it names now: it
// opens the path without following a final symlink and bind-mounts that open
// file onto a private staging path. Whatever later happens to the original
// path (a swap for a symlink to /), the staging path shows what was opened.
//
// The sandbox backends bind staging paths instead of the originals: Docker
// because the engine binds by path, bubblewrap because a root host runs it as
// an unprivileged user that may not be able to traverse to the originals
// (a project under /root); the staging directory is made traversable.
// Pinning needs root (CAP_SYS_ADMIN in the host's mount namespace).
package pin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Set is the staging binds of one invocation, under Dir.
type Set struct {
	Dir   string
	n     int
	paths []string
}

// NewSet makes the invocation's staging directory under root. Mode 0711
// lets the sandbox user reach staging paths whose names it is given, and
// list nothing.
func NewSet(root, invocation string) (*Set, error) {
	dir := filepath.Join(root, invocation)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("pin: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("pin: %w", err)
	}
	return &Set{Dir: dir}, nil
}

// Add pins src and returns its staging path. It accepts a directory, a
// regular file or a socket; never a symlink.
func (s *Set) Add(src string) (string, error) {
	s.n++
	staged := filepath.Join(s.Dir, strconv.Itoa(s.n))
	fd, err := unix.Open(src, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("pin %s: %w", src, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("pin %s: %w", src, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		err = os.Mkdir(staged, 0o700)
	case unix.S_IFREG, unix.S_IFSOCK:
		err = os.WriteFile(staged, nil, 0o600)
	default:
		return "", fmt.Errorf("pin %s: not a directory, regular file or socket (symlinks are not followed)", src)
	}
	if err != nil {
		return "", fmt.Errorf("pin %s: %w", src, err)
	}
	if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), staged, "", unix.MS_BIND, ""); err != nil {
		_ = os.Remove(staged)
		return "", fmt.Errorf("pin %s: bind to %s: %w", src, staged, err)
	}
	s.paths = append(s.paths, staged)
	return staged, nil
}

// Release unmounts every staging bind and removes the directory; call it
// once nothing uses them any more.
func (s *Set) Release() {
	if s == nil {
		return
	}
	for _, p := range s.paths {
		_ = unix.Unmount(p, unix.MNT_DETACH)
		_ = os.Remove(p)
	}
	s.paths = nil
	_ = os.Remove(s.Dir)
}

// Clean releases what a crash left under root.
func Clean(root string) error {
	invs, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("clean pinned mounts: %w", err)
	}
	for _, inv := range invs {
		d := filepath.Join(root, inv.Name())
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			p := filepath.Join(d, e.Name())
			_ = unix.Unmount(p, unix.MNT_DETACH)
			if err := os.Remove(p); err != nil {
				return fmt.Errorf("clean pinned mount %s: %w", p, err)
			}
		}
		if err := os.Remove(d); err != nil {
			return fmt.Errorf("clean pinned mounts: %w", err)
		}
	}
	return nil
}
