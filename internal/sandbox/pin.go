package sandbox

// Pins fix a bind source to the file or directory it names now: a pin
// opens the path, which the host resolved, without following a symlink in
// any component (package beneath), and bind-mounts that open file onto a
// private staging path. Whatever later happens to the original
// path (a swap for a symlink to /), the staging path shows what was opened.
//
// The sandbox backends bind staging paths instead of the originals: Docker
// because the engine binds by path, bubblewrap because a root host runs it as
// an unprivileged user that may not be able to traverse to the originals
// (a project under /root); the staging directory is made traversable.
// Pinning needs root (CAP_SYS_ADMIN in the host's mount namespace). A pin is
// nosuid,nodev; with an IDMap it is also an idmapped mount, which lets
// Docker's uid 1000 write as a dedicated host user.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/beneath"
)

// PinSet is the staging binds of one invocation, under Dir.
type PinSet struct {
	Dir   string
	n     int
	paths []string
}

// NewPinSet makes the invocation's staging directory under root. Mode 0711
// lets the sandbox user reach staging paths whose names it is given, and
// list nothing.
func NewPinSet(root, invocation string) (*PinSet, error) {
	dir := filepath.Join(root, invocation)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("pin: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("pin: %w", err)
	}
	return &PinSet{Dir: dir}, nil
}

// PinOptions shape one pin.
type PinOptions struct {
	// IDMap, when set, makes the pin an idmapped mount (see IDMap).
	IDMap *IDMap
	// ReadOnly makes the pin itself read-only: a bind of it stays so.
	ReadOnly bool
}

// Add pins src and returns its staging path. It accepts a directory, a
// regular file or a socket; never a symlink, nor a path with a symlink in
// it: src is resolved (a validated mount, the resolved data dir), so a
// symlink found in it now was swapped in since. Every pin is nosuid and nodev,
// and so is every bind made of it.
func (s *PinSet) Add(src string) (string, error) { return s.AddWith(src, PinOptions{}) }

// AddWith is Add with options.
func (s *PinSet) AddWith(src string, o PinOptions) (string, error) {
	s.n++
	staged := filepath.Join(s.Dir, strconv.Itoa(s.n))
	fd, err := beneath.Open(src, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", fmt.Errorf("pin: %w", err)
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
	if err := attach(fd, staged, o); err != nil {
		_ = os.Remove(staged)
		return "", fmt.Errorf("pin %s: %w", src, err)
	}
	s.paths = append(s.paths, staged)
	return staged, nil
}

// attach mounts a clone of fd's mount, rooted at fd, onto staged.
func attach(fd int, staged string, o PinOptions) error {
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.ENOSYS) && o == (PinOptions{}) {
		// Before Linux 5.2: a plain bind. bwrap, the only user of plain
		// pins, makes its own binds of them nosuid,nodev.
		return unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), staged, "", unix.MS_BIND, "")
	}
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(tree)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if o.ReadOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if o.IDMap != nil {
		attr.Attr_set |= unix.MOUNT_ATTR_IDMAP
		attr.Userns_fd = uint64(o.IDMap.ns.Fd())
	}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		switch {
		case o.IDMap != nil && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM)):
			return fmt.Errorf("idmapped mount not possible here (Linux 5.12 or later and a filesystem that supports it, such as ext4, xfs, btrfs or tmpfs, are needed): %w", err)
		case errors.Is(err, unix.ENOSYS) && o == (PinOptions{}):
			// Before Linux 5.12; as above.
			return unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), staged, "", unix.MS_BIND, "")
		}
		return fmt.Errorf("mount_setattr: %w", err)
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, staged, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount to %s: %w", staged, err)
	}
	return nil
}

// Release unmounts every staging bind and removes the directory; call it
// once nothing uses them any more.
func (s *PinSet) Release() {
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

// CleanPins releases what a crash left under root.
func CleanPins(root string) error {
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
