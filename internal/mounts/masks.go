package mounts

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
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
//     pattern; a masked directory is not descended into;
//   - sockets, devices and fifos, whatever their name (a docker.sock inside
//     a project must not become a door out);
//   - protected paths of mode ProtectAll that lie inside root (the data dir
//     inside the project the owner mounts into main).
//
// Symlinks are never followed. Any error reading the tree, or visiting more
// than limit entries (limit <= 0 means DefaultMaskLimit), is an error and
// the mount must then be refused: an unchecked tree may hold anything.
// A root that is a regular file has nothing to mask.
func Masks(root string, al Allowlist, limit int) ([]string, error) {
	if limit <= 0 {
		limit = DefaultMaskLimit
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return nil, fmt.Errorf("masks of %s: %w", root, err)
	}
	if !fi.IsDir() {
		return nil, nil
	}
	folded := al.patterns()
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
		err := readDirChunks(filepath.Join(root, dir), func(e fs.DirEntry) error {
			visited++
			if visited > limit {
				return fmt.Errorf("%w: more than %d under %s", ErrTooManyEntries, limit, root)
			}
			rel := filepath.Join(dir, e.Name())
			t := e.Type()
			_, blocked := blockedBy(e.Name(), folded)
			special := t&(fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeIrregular) != 0
			if blocked || special || protected[rel] {
				masks = append(masks, rel)
				return nil
			}
			if t.IsDir() {
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

// readDirChunks calls fn for every entry of dir, reading in chunks so that a
// huge directory hits the cap before it fills memory. O_NOFOLLOW: a
// directory swapped for a symlink since it was listed is not followed.
func readDirChunks(dir string, fn func(fs.DirEntry) error) error {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		entries, err := f.ReadDir(1024)
		for _, e := range entries {
			if ferr := fn(e); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", dir, err)
		}
	}
}
