package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/beneath"
)

// ErrDiskQuota marks a run refused, or stopped, because the group's folder and
// session dir together use more than the group's disk quota.
var ErrDiskQuota = errors.New("disk quota exceeded")

// Disk use is measured by walking the trees: no filesystem quota is assumed
// (project quotas need mount options a host rarely has). The walk is what
// bounds the overshoot of a run, so it runs often while the tree is small and
// backs off when walking gets expensive.
const (
	diskPollMin = 20 * time.Millisecond
	diskPollMax = 2 * time.Second
	// diskPollFactor keeps the watcher's own cost near 1/factor of a core.
	diskPollFactor = 20
	// maxTreeDepth bounds the walk's open descriptors; a deeper tree cannot be
	// measured and counts as over quota.
	maxTreeDepth = 128
	// bytesPerEntry prices an entry for the entry limit: a quota of Q bytes
	// allows Q/bytesPerEntry files and directories, so empty files cannot
	// exhaust inodes under a byte quota.
	bytesPerEntry = 4096
)

// diskUsage is what a set of trees holds.
type diskUsage struct {
	Bytes   int64 // allocated bytes (st_blocks), so sparse files count what they use
	Entries int64
}

func (u diskUsage) over(quota int64) bool {
	return u.Bytes > quota || u.Entries > quota/bytesPerEntry
}

func (u diskUsage) String() string {
	return fmt.Sprintf("%.1f MB in %d entries", float64(u.Bytes)/1e6, u.Entries)
}

// measureDisk walks the roots without following any symlink: a root (a path
// the host resolved) is opened with no symlink in any component, and every
// directory below it relative to its parent's descriptor (package beneath),
// so a sandbox that swaps a directory, or a parent of the root, for a
// symlink while the host walks cannot send the walk elsewhere. A missing
// root counts as empty. An entry that vanishes during the
// walk is skipped (the sandbox may still be writing).
func measureDisk(roots ...string) (diskUsage, error) {
	var u diskUsage
	for _, root := range roots {
		fd, err := beneath.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return u, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			_ = unix.Close(fd)
			return u, fmt.Errorf("stat %s: %w", root, err)
		}
		u.Bytes += st.Blocks * 512
		if err := walkDir(fd, root, 1, &u); err != nil {
			return u, err
		}
	}
	return u, nil
}

// walkDir adds everything under the directory open at fd (which it closes).
func walkDir(fd int, name string, depth int, u *diskUsage) error {
	dir := os.NewFile(uintptr(fd), name)
	defer dir.Close()
	if depth > maxTreeDepth {
		return fmt.Errorf("%s: directories nested deeper than %d levels", name, maxTreeDepth)
	}
	for {
		names, err := dir.Readdirnames(512)
		for _, n := range names {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue
				}
				return fmt.Errorf("stat %s/%s: %w", name, n, err)
			}
			u.Bytes += st.Blocks * 512
			u.Entries++
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
			child, err := beneath.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
			if err != nil {
				// Replaced by something else since the stat: not a directory now.
				if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
					continue
				}
				return fmt.Errorf("open %s/%s: %w", name, n, err)
			}
			if err := walkDir(child, name+"/"+n, depth+1, u); err != nil {
				return err
			}
		}
		// ENOENT: the directory was removed while it was being listed,
		// which the kernel allows only once it is empty.
		if errors.Is(err, io.EOF) || errors.Is(err, unix.ENOENT) || (err == nil && len(names) == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", name, err)
		}
	}
}

// checkDisk measures the roots against quota before a run.
func checkDisk(quota int64, roots ...string) (diskUsage, error) {
	u, err := measureDisk(roots...)
	if err != nil {
		return u, fmt.Errorf("%w: cannot measure the group's files: %v", ErrDiskQuota, err)
	}
	if u.over(quota) {
		return u, fmt.Errorf("%w: the group's folder and session use %s, over the quota of %d MB", ErrDiskQuota, u, quota>>20)
	}
	return u, nil
}

// watchDisk measures the roots until ctx ends and calls over (once) when they
// exceed quota or can no longer be measured. It returns the largest use seen.
func watchDisk(ctx context.Context, quota int64, over func(error), roots ...string) (peak diskUsage) {
	wait := diskPollMin
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return peak
		case <-timer.C:
		}
		start := time.Now()
		u, err := measureDisk(roots...)
		if u.Bytes > peak.Bytes {
			peak.Bytes = u.Bytes
		}
		if u.Entries > peak.Entries {
			peak.Entries = u.Entries
		}
		switch {
		case err != nil:
			over(fmt.Errorf("%w: cannot measure the group's files: %v", ErrDiskQuota, err))
			return peak
		case u.over(quota):
			over(fmt.Errorf("%w: the group's folder and session reached %s, over the quota of %d MB", ErrDiskQuota, u, quota>>20))
			return peak
		}
		wait = min(max(diskPollFactor*time.Since(start), diskPollMin), diskPollMax)
		timer.Reset(wait)
	}
}
