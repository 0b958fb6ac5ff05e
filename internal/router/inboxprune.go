package router

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/beneath"
)

// inboxTimeLayout is the time at the start of every inbox name (inboxName).
const inboxTimeLayout = "20060102-150405"

// maxInboxScan bounds how many names one prune reads from one inbox: the
// group may have filled it with millions of names.
const maxInboxScan = 100_000

// PruneInbox removes from the inbox of folder, a group's folder (an
// absolute path below the groups dir the host resolved at start), the
// files fetched before before, by the time in their names
// (CLAWPEN_RETENTION). The inbox is in a folder the sandbox writes, so it
// is pruned with the sandbox user's rights (u), and nothing in it is
// trusted: it is reached through no symlink in any component (an inbox
// swapped for a symlink to another group's folder or to /etc is refused,
// ELOOP, and nothing is removed), only names the host makes are removed, a
// symlink is removed itself and never its target, and a directory is left
// alone. A missing inbox is no error.
func PruneInbox(u beneath.User, folder string, before time.Time) (removed int, err error) {
	root, err := beneath.Open(folder, unix.O_PATH|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOENT) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("prune inbox: %w", err)
	}
	defer unix.Close(root)
	err = u.Do(func() error {
		removed, err = pruneBeneath(root, "inbox", before)
		return err
	})
	return removed, err
}

// pruneBeneath removes from dir below root the inbox files fetched before
// before.
func pruneBeneath(root int, dir string, before time.Time) (removed int, err error) {
	fd, err := beneath.Openat(root, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOENT) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("prune inbox: %w", err)
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	for scanned := 0; scanned < maxInboxScan; {
		names, rerr := f.Readdirnames(1024)
		scanned += len(names)
		for _, name := range names {
			at, ok := inboxTime(name)
			if !ok || !at.Before(before) {
				continue
			}
			var st unix.Stat_t
			if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
				continue
			}
			if err := unix.Unlinkat(fd, name, 0); err == nil {
				removed++
			}
		}
		if rerr == io.EOF {
			return removed, nil
		}
		if rerr != nil {
			return removed, fmt.Errorf("prune inbox %s: %w", dir, rerr)
		}
	}
	return removed, nil
}

// inboxTime is the fetch time in name when name is as inboxName makes
// them: <yyyymmdd-hhmmss>-<message id>.<extension>.
func inboxTime(name string) (time.Time, bool) {
	if len(name) < len(inboxTimeLayout)+4 || name[len(inboxTimeLayout)] != '-' {
		return time.Time{}, false
	}
	at, err := time.Parse(inboxTimeLayout, name[:len(inboxTimeLayout)])
	if err != nil {
		return time.Time{}, false
	}
	id, ext, ok := strings.Cut(name[len(inboxTimeLayout)+1:], ".")
	if !ok || !digitsOnly(strings.TrimPrefix(id, "-")) || ext == "" || !alnumOnly(ext) {
		return time.Time{}, false
	}
	return at, true
}

func digitsOnly(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

func alnumOnly(s string) bool {
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'z') {
			return false
		}
	}
	return true
}
