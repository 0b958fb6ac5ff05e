package beneath

// Taking privileges out of a tree a sandbox could write, from the host,
// after the sandbox is gone: Strip removes setuid, setgid and world-write
// bits, HandOver gives a folder to the sandbox user.
//
// The tree is hostile. The root, a path the host resolved, is opened with no
// symlink in any component, and every entry below it from its parent's
// descriptor, beneath it, never through a symlink and never into another
// mount (beneath.go); a mode or owner is changed through a descriptor of the
// entry itself, never through a path: a symlink swapped in, or a directory
// moved meanwhile (a writable extra mount may be shared with a group that is
// still running), cannot redirect a change outside the tree. The walk is
// bounded (entries, depth, time); a WalkReport says when it was cut short.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// WalkLimits bound one walk.
type WalkLimits struct {
	Entries int           // entries visited, root included
	Depth   int           // directory levels below the root
	Time    time.Duration // wall time
}

// DefaultWalkLimits keep the walk after a run to a few seconds at worst: a walk
// costs about 3 µs an entry (BenchmarkStrip: 10,000 entries in 30–70 ms
// on a loaded 2-core machine), so the entry limit is reached in well under
// a second and the time limit guards against a slow disk.
var DefaultWalkLimits = WalkLimits{Entries: 100_000, Depth: 128, Time: 5 * time.Second}

// WalkReport is what one walk did.
type WalkReport struct {
	Entries int // visited, root included
	Changed int // entries whose mode or owner was changed
	Skipped int // entries left as they were: could not be opened, another mount, a hard link on hand-over
	// CutShort says why the walk ended before it saw everything ("" when
	// it did not): a limit or a cancelled context.
	CutShort string
}

// StripBits are what Strip removes: setuid, setgid and write for others.
const StripBits = unix.S_ISUID | unix.S_ISGID | unix.S_IWOTH

// Strip removes StripBits from every entry under root, root included, symlinks
// excepted (their mode means nothing). With owner >= 0 only entries of that
// uid are changed: in a tree shared with a person (a writable extra mount),
// only the sandbox user's entries can carry bits a sandbox set, and the
// person's own (a setgid project directory) stay as they are.
func Strip(ctx context.Context, root string, owner int, lim WalkLimits) (WalkReport, error) {
	return walk(ctx, root, lim, action{
		needs: func(st *unix.Stat_t) (bool, bool) {
			return st.Mode&unix.S_IFMT != unix.S_IFLNK && st.Mode&StripBits != 0 && (owner < 0 || int(st.Uid) == owner), false
		},
		do: func(fd int, st *unix.Stat_t, readable bool) error {
			return chmod(fd, st.Mode&0o7777&^StripBits, readable)
		},
	})
}

// HandOver makes uid:gid the owner of every entry under root, root
// included (symlinks themselves, not their targets). A regular file with
// more than one link is skipped: it may be a hard link a sandbox made to a
// file elsewhere on the filesystem, which must not change hands. A chown
// clears setuid and setgid on the way.
func HandOver(ctx context.Context, root string, uid, gid int, lim WalkLimits) (WalkReport, error) {
	if uid < 0 || gid < 0 {
		return WalkReport{}, fmt.Errorf("hand %s over: invalid owner %d:%d", root, uid, gid)
	}
	return walk(ctx, root, lim, action{
		needs: func(st *unix.Stat_t) (bool, bool) {
			if int(st.Uid) == uid && int(st.Gid) == gid {
				return false, false
			}
			if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink > 1 {
				return false, true
			}
			return true, false
		},
		do: func(fd int, _ *unix.Stat_t, _ bool) error {
			return unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH)
		},
	})
}

// action is what a walk does to each entry.
type action struct {
	// needs reports whether the entry must change, or is left alone on
	// purpose (skip, counted in the report).
	needs func(st *unix.Stat_t) (change, skip bool)
	// do changes the entry through fd: O_PATH, or readable for a directory.
	do func(fd int, st *unix.Stat_t, readable bool) error
}

type walker struct {
	ctx      context.Context
	lim      WalkLimits
	deadline time.Time
	act      action
	rep      WalkReport
	euid     int
	tooDeep  bool // a directory below the depth limit was not entered
}

func walk(ctx context.Context, root string, lim WalkLimits, act action) (WalkReport, error) {
	if lim.Entries <= 0 {
		lim.Entries = DefaultWalkLimits.Entries
	}
	if lim.Depth <= 0 {
		lim.Depth = DefaultWalkLimits.Depth
	}
	if lim.Time <= 0 {
		lim.Time = DefaultWalkLimits.Time
	}
	w := &walker{ctx: ctx, lim: lim, deadline: time.Now().Add(lim.Time), act: act, euid: os.Geteuid()}
	// The root is a path the host resolved (groups/<folder>, a validated
	// mount): a symlink anywhere in it now is a swap, and refused. It may
	// be a file (an extra mount of one file).
	pfd, err := Open(root, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		return w.rep, fmt.Errorf("scrub %s: %w", root, err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return w.rep, fmt.Errorf("scrub %s: %w", root, err)
	}
	w.rep.Entries++
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return w.rep, fmt.Errorf("scrub %s: a symlink, not followed", root)
	case unix.S_IFDIR:
	default:
		if err := w.apply(pfd, &st, false); err != nil {
			return w.rep, fmt.Errorf("scrub %s: %w", root, err)
		}
		return w.rep, nil
	}
	fd, err := Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return w.rep, fmt.Errorf("scrub %s: %w", root, err)
	}
	if err := w.apply(fd, &st, true); err != nil {
		_ = unix.Close(fd)
		return w.rep, fmt.Errorf("scrub %s: %w", root, err)
	}
	w.dir(fd, 0) // closes fd
	if w.tooDeep && w.rep.CutShort == "" {
		w.rep.CutShort = "depth limit of " + strconv.Itoa(w.lim.Depth) + " reached: deeper directories not visited"
	}
	return w.rep, nil
}

// apply changes one entry if it needs it, and counts what happened.
func (w *walker) apply(fd int, st *unix.Stat_t, readable bool) error {
	change, skip := w.act.needs(st)
	switch {
	case skip:
		w.rep.Skipped++
	case change:
		if err := w.act.do(fd, st, readable); err != nil {
			return err
		}
		w.rep.Changed++
	}
	return nil
}

// stop reports whether a limit ended the walk (and records which).
func (w *walker) stop() bool {
	if w.rep.CutShort != "" {
		return true
	}
	switch {
	case w.ctx.Err() != nil:
		w.rep.CutShort = "cancelled: " + w.ctx.Err().Error()
	case w.rep.Entries >= w.lim.Entries:
		w.rep.CutShort = "entry limit of " + strconv.Itoa(w.lim.Entries) + " reached"
	case w.rep.Entries%256 == 0 && time.Now().After(w.deadline):
		w.rep.CutShort = "time limit of " + w.lim.Time.String() + " reached"
	}
	return w.rep.CutShort != ""
}

// dir visits the entries of the open directory fd (and closes it).
func (w *walker) dir(fd int, depth int) {
	f := os.NewFile(uintptr(fd), "dir")
	defer f.Close()
	for !w.stop() {
		names, err := f.Readdirnames(512)
		for _, name := range names {
			if w.stop() {
				return
			}
			w.rep.Entries++
			w.entry(fd, name, depth)
		}
		if err == io.EOF || len(names) == 0 {
			return
		}
		if err != nil {
			w.rep.Skipped++
			return
		}
	}
}

func (w *walker) entry(parent int, name string, depth int) {
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		w.rep.Skipped++ // gone since it was listed, or unreadable
		return
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if depth+1 > w.lim.Depth {
			w.tooDeep = true
			return
		}
		fd, err := w.openDir(parent, name)
		if err != nil {
			w.rep.Skipped++
			return
		}
		if err := unix.Fstat(fd, &st); err != nil || w.apply(fd, &st, true) != nil {
			w.rep.Skipped++
		}
		w.dir(fd, depth+1)
		return
	}
	// Only an entry that needs a change is opened; the stat taken through
	// its descriptor is the one acted on.
	if change, skip := w.act.needs(&st); !change {
		if skip {
			w.rep.Skipped++
		}
		return
	}
	fd, err := OpenatSameMount(parent, name, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		w.rep.Skipped++
		return
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR || w.apply(fd, &st, false) != nil {
		w.rep.Skipped++
	}
}

// openDir opens a subdirectory for reading. A directory a non-root host
// cannot read but owns (a sandbox made it 0000 to hide what is inside) is
// given u+rx first.
func (w *walker) openDir(parent int, name string) (int, error) {
	fd, err := OpenatSameMount(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if !errors.Is(err, unix.EACCES) {
		return fd, err
	}
	p, perr := OpenatSameMount(parent, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if perr != nil {
		return -1, err
	}
	defer unix.Close(p)
	var st unix.Stat_t
	if unix.Fstat(p, &st) != nil || int(st.Uid) != w.euid {
		return -1, err
	}
	if chmod(p, st.Mode&0o7777|0o500, false) != nil {
		return -1, err
	}
	return Openat(p, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
}

// chmod sets the mode of the entry fd refers to: fchmod on a readable
// directory; for an O_PATH descriptor fchmodat2(AT_EMPTY_PATH), or on
// kernels before 6.6 chmod through /proc/self/fd, which reaches the same
// inode and no other.
func chmod(fd int, mode uint32, readable bool) error {
	if readable {
		return unix.Fchmod(fd, mode)
	}
	err := unix.Fchmodat(fd, "", mode, unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
		return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode)
	}
	return err
}
