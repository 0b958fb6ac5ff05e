// Package beneath opens paths in trees a sandbox can write (group folders,
// session dirs, extra mounts) without following a symlink in any component,
// and walks such a tree to strip privileges from it or hand it over (scrub.go).
//
// O_NOFOLLOW guards only the last component: a directory higher up swapped
// for a symlink (by the sandbox before it ended, by a Docker container still
// tearing down, or by another group sharing a writable extra mount) sends
// an ordinary open to another group's folder or to /etc. Every open here is
// openat2 with RESOLVE_NO_SYMLINKS, so such a swap makes the open fail
// (ELOOP) instead of being followed.
//
// A path is given in one of two forms:
//   - absolute, resolved by the host once, at a moment it could trust
//     (config resolves the data and groups dirs at start; mounts.Validate
//     resolves an extra mount right before a run): no component may be a
//     symlink now;
//   - a name below a directory descriptor the caller already holds, for
//     walks: resolved beneath it (RESOLVE_BENEATH: no "..", no absolute
//     name), never through a symlink.
//
// A trailing symlink is refused too, except with O_PATH|O_NOFOLLOW, which
// opens the symlink itself (to stat or unlink it, never its target).
// openat2 needs Linux 5.6; on an older kernel every open fails (closed).
package beneath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Resolve is how every open here resolves a name below a directory:
// beneath it, never through a symlink or a /proc magic link.
const Resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// ErrNotAbsolute is returned for a path that is not absolute.
var ErrNotAbsolute = errors.New("not an absolute path")

// Open opens path, an absolute path the host resolved earlier, without
// following a symlink in any of its components. O_CLOEXEC is always added.
func Open(path string, flags int, mode uint32) (int, error) {
	rel, err := fromRoot(path)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: "/", Err: err}
	}
	defer unix.Close(root)
	fd, err := openat(root, rel, flags, mode, Resolve)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: explain(err)}
	}
	return fd, nil
}

// Openat opens name below the directory dirfd, beneath it and never through
// a symlink. O_CLOEXEC is always added.
func Openat(dirfd int, name string, flags int, mode uint32) (int, error) {
	return openat(dirfd, name, flags, mode, Resolve)
}

// OpenatSameMount is Openat that also refuses to enter another mount
// (RESOLVE_NO_XDEV), for walks that must stay on one filesystem.
func OpenatSameMount(dirfd int, name string, flags int, mode uint32) (int, error) {
	return openat(dirfd, name, flags, mode, Resolve|unix.RESOLVE_NO_XDEV)
}

func openat(dirfd int, name string, flags int, mode uint32, resolve uint64) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolve}
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(dirfd, name, how)
		// EAGAIN: a rename elsewhere raced the lookup; the kernel asks
		// for a retry rather than risk a wrong answer.
		if (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR)) && tries < 16 {
			continue
		}
		return fd, err
	}
}

// Lstat stats path (absolute, resolved earlier) without following a symlink
// in any component; a trailing symlink is stat'ed itself.
func Lstat(path string, st *unix.Stat_t) error {
	fd, err := Open(path, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, st); err != nil {
		return &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return nil
}

// MkdirAll creates path (absolute, its existing part resolved earlier) and
// any missing parents with mode (less the umask), never through a symlink.
// An existing directory is fine; anything else in the way is an error.
func MkdirAll(path string, mode uint32) error {
	rel, err := fromRoot(path)
	if err != nil {
		return &os.PathError{Op: "mkdir", Path: path, Err: err}
	}
	dir, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "mkdir", Path: "/", Err: err}
	}
	done := "/"
	for _, name := range strings.Split(rel, "/") {
		if name == "." {
			continue
		}
		next, err := mkdirat(dir, name, mode)
		_ = unix.Close(dir)
		done = filepath.Join(done, name)
		if err != nil {
			return &os.PathError{Op: "mkdir", Path: done, Err: explain(err)}
		}
		dir = next
	}
	_ = unix.Close(dir)
	return nil
}

// mkdirat opens the directory name below dirfd, creating it first when it
// is missing.
func mkdirat(dirfd int, name string, mode uint32) (int, error) {
	const flags = unix.O_PATH | unix.O_DIRECTORY
	fd, err := Openat(dirfd, name, flags, 0)
	if !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	if err := unix.Mkdirat(dirfd, name, mode); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, err
	}
	return Openat(dirfd, name, flags, 0)
}

// Remove unlinks the entry name (a plain name, no "/") of the directory dir
// (absolute, resolved earlier; reached without a symlink). A symlink named
// name is removed itself, never its target; a directory is not removed.
// A missing name is not an error: removed reports whether one was there.
func Remove(dir, name string) (removed bool, err error) {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return false, &os.PathError{Op: "remove", Path: name, Err: errors.New("not a plain file name")}
	}
	fd, err := Open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	err = unix.Unlinkat(fd, name, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return false, nil
	case err != nil:
		return false, &os.PathError{Op: "remove", Path: filepath.Join(dir, name), Err: err}
	}
	return true, nil
}

// Move renames dir/name to toDir/toName, both directories reached with no
// symlink in any component, never replacing what is at toName. The entry
// moves as it is (a symlink moves as a symlink; nothing is followed). It
// reports false when dir/name does not exist.
func Move(dir, name, toDir, toName string) (moved bool, err error) {
	for _, n := range []string{name, toName} {
		if n == "" || n == "." || n == ".." || strings.ContainsRune(n, '/') {
			return false, &os.PathError{Op: "move", Path: n, Err: errors.New("not a plain file name")}
		}
	}
	from, err := Open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(from)
	to, err := Open(toDir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(to)
	err = unix.Renameat2(from, name, to, toName, unix.RENAME_NOREPLACE)
	switch {
	case errors.Is(err, unix.ENOENT):
		return false, nil
	case err != nil:
		return false, &os.PathError{Op: "move", Path: filepath.Join(dir, name), Err: err}
	}
	return true, nil
}

// fromRoot turns an absolute path into the name below "/" to resolve.
func fromRoot(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", ErrNotAbsolute
	}
	rel := strings.TrimLeft(filepath.Clean(path), "/")
	if rel == "" {
		rel = "."
	}
	return rel, nil
}

// explain names the two errors whose bare text misleads here.
func explain(err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("a symlink in the path, not followed: %w", err)
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("openat2 is not available (Linux 5.6 or later is needed): %w", err)
	}
	return err
}
