package mounts

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/beneath"
)

// DefaultMaskLimit is the walk cap callers use unless they have a reason.
const DefaultMaskLimit = 200_000

// ErrTooManyEntries is wrapped by Masks when the walk exceeds its limit; the
// caller then refuses the mount (fail closed).
var ErrTooManyEntries = errors.New("too many entries to check for masking")

// Masks walks the resolved mount source root and lists, relative to root and
// sorted, the entries the sandbox must hide by binding an empty file or
// directory over them:
//   - entries (files, directories, symlinks) whose NAME matches a blocked
//     pattern (a multi-component pattern: whose path ends with its names);
//     a masked directory is not descended into;
//   - sockets, devices and fifos, whatever their name (a docker.sock inside
//     a project must not become a door out);
//   - protected paths of mode ProtectAll that lie inside root (the data dir
//     inside the project the owner mounts into main).
//
// Symlinks are never followed: root (resolved by Validate) is opened with
// no symlink in any component, and every directory below it beneath it
// (package beneath), so a directory swapped for a symlink, above root or
// inside it, fails the walk instead of listing another tree. Any error
// reading the tree, or visiting more than limit entries (limit <= 0 means
// DefaultMaskLimit), is an error and the mount must then be refused: an
// unchecked tree may hold anything. A root that is a regular file has
// nothing to mask.
func Masks(root string, al Allowlist, limit int) ([]string, error) {
	if limit <= 0 {
		limit = DefaultMaskLimit
	}
	rootFD, err := beneath.Open(root, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("masks of %s: %w", root, err)
	}
	defer unix.Close(rootFD)
	var st unix.Stat_t
	if err := unix.Fstat(rootFD, &st); err != nil {
		return nil, fmt.Errorf("masks of %s: %w", root, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
	case unix.S_IFLNK:
		return nil, fmt.Errorf("masks of %s: a symlink, not followed: %w", root, unix.ELOOP)
	default:
		return nil, nil
	}
	ps := al.patterns()
	protected := map[string]bool{}
	for _, pr := range al.Protected {
		if pr.Mode != ProtectAll {
			continue
		}
		pp := resolveBest(pr.Path)
		if pp != root && within(pp, root) {
			rel, err := filepath.Rel(root, pp)
			if err == nil {
				protected[rel] = true
			}
		}
	}

	var masks []string
	visited := 0
	stack := []string{"."}
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		// Multi-component patterns see the whole path, root included.
		parent := foldPath(filepath.Join(root, dir))
		err := readDirChunks(rootFD, dir, func(name string, mode uint32) error {
			visited++
			if visited > limit {
				return fmt.Errorf("%w: more than %d under %s", ErrTooManyEntries, limit, root)
			}
			rel := filepath.Join(dir, name)
			_, blocked := blockedTail(append(parent[:len(parent):len(parent)], fold(name)), ps)
			special := mode != unix.S_IFDIR && mode != unix.S_IFREG && mode != unix.S_IFLNK
			if blocked || special || protected[rel] {
				masks = append(masks, rel)
				return nil
			}
			if mode == unix.S_IFDIR {
				stack = append(stack, rel)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("masks of %s: %w", root, err)
		}
	}
	sort.Strings(masks)
	return masks, nil
}

// readDirChunks calls fn with the name and file type (S_IFMT bits) of every
// entry of dir, opened below root. It reads in chunks so that a huge
// directory hits the cap before it fills memory, and takes each type from
// fstatat on the directory's descriptor, never from a path.
func readDirChunks(root int, dir string, fn func(name string, mode uint32) error) error {
	fd, err := beneath.Openat(root, dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	for {
		names, err := f.Readdirnames(1024)
		for _, name := range names {
			var st unix.Stat_t
			err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
			if errors.Is(err, unix.ENOENT) {
				continue // gone since it was listed: nothing to hide
			}
			if err != nil {
				return fmt.Errorf("stat %s: %w", filepath.Join(dir, name), err)
			}
			if ferr := fn(name, st.Mode&unix.S_IFMT); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF || (err == nil && len(names) == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", dir, err)
		}
	}
}
