package beneath

// Acting for a sandbox with its rights, not the host's. A root host that
// opens, creates or removes a name a sandbox chose (send_file's path, the
// inbox in its folder) would otherwise do it as root: a file the sandbox
// cannot read (0600 of another owner in a read-only extra mount, a file in
// a 0700 directory whose name it guesses) would be read for it. User.Do
// runs such work on one OS thread whose file-system ids are the sandbox
// user's: the kernel then checks every lookup, open, create and unlink as
// it checks the sandbox's own. The host still opens the tree's root itself
// (a path it resolved, which the sandbox reaches through a bind and may
// have no right to walk to on the host) and hands Do the descriptor.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// User is a sandbox's identity on the host's file systems: the dedicated
// sandbox user of a root host. Its zero value, or any UID <= 0, is the
// host's own rights: a host that is not root runs its sandboxes as itself.
//
// Every backend's sandbox is this user on the host's disk, with no
// supplementary groups: bwrap runs as it (setgroups to none), Docker's
// uid 1000 (no supplementary groups) writes through pins idmapped to it.
type User struct{ UID, GID int }

// switches reports whether acting as u changes anything: only a root host
// can, and needs to, take another user's rights.
func (u User) switches() bool { return u.UID > 0 && u.GID > 0 && os.Geteuid() == 0 }

// Do runs f with u's file-system rights: on one locked OS thread whose
// fsuid and fsgid are u's and which has no supplementary groups (root's
// group 0 would otherwise still open group-readable files of root's). The
// thread's own ids are restored afterwards; f must do its work on the
// calling goroutine (anything it starts elsewhere has the host's rights).
// Without a switch (see User) f simply runs.
//
// The thread is never left to exit nor handed back changed: should the
// restore fail (it cannot with euid 0), it stays parked for good, since a
// thread that exits fires the Pdeathsig of every child it started, and a
// sandbox may be one.
func (u User) Do(f func() error) error {
	if !u.switches() {
		return f()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		groups, err := unix.Getgroups()
		if err != nil {
			runtime.UnlockOSThread() // nothing changed yet
			done <- fmt.Errorf("act as uid %d: read the host's groups: %w", u.UID, err)
			return
		}
		err = u.become()
		if err == nil {
			err = f()
		}
		if rerr := restore(groups); rerr != nil {
			done <- errors.Join(err, fmt.Errorf("restore the host's file-system ids on a thread: %w", rerr))
			select {}
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// become gives the current thread u's file-system ids and no supplementary
// groups. setfsuid and setfsgid report the previous value only, so each is
// asked again to confirm.
func (u User) become() error {
	if err := unix.Setgroups(nil); err != nil {
		return fmt.Errorf("act as uid %d: drop supplementary groups: %w", u.UID, err)
	}
	_, _ = unix.SetfsgidRetGid(u.GID)
	if got, _ := unix.SetfsgidRetGid(u.GID); got != u.GID {
		return fmt.Errorf("act as uid %d: fsgid is %d, not %d", u.UID, got, u.GID)
	}
	_, _ = unix.SetfsuidRetUid(u.UID)
	if got, _ := unix.SetfsuidRetUid(u.UID); got != u.UID {
		return fmt.Errorf("act as uid %d: fsuid is %d, not %d", u.UID, got, u.UID)
	}
	return nil
}

// restore gives the current thread back the host's file-system ids (its
// effective ids: a root host's capabilities come back with fsuid 0) and
// supplementary groups.
func restore(groups []int) error {
	uid, gid := os.Geteuid(), os.Getegid()
	_, _ = unix.SetfsuidRetUid(uid)
	if got, _ := unix.SetfsuidRetUid(uid); got != uid {
		return fmt.Errorf("fsuid is %d, not %d", got, uid)
	}
	_, _ = unix.SetfsgidRetGid(gid)
	if got, _ := unix.SetfsgidRetGid(gid); got != gid {
		return fmt.Errorf("fsgid is %d, not %d", got, gid)
	}
	if err := unix.Setgroups(groups); err != nil {
		return fmt.Errorf("supplementary groups: %w", err)
	}
	return nil
}

// Reopen opens anew, with flags, the file the descriptor fd refers to (an
// O_PATH descriptor of a root the host opened): the open checks the
// caller's rights on that file itself, as a sandbox's open of its bind's
// root does. It goes through /proc/thread-self/fd, which reaches that inode
// and no other. O_CLOEXEC is always added.
func Reopen(fd, flags int) (int, error) {
	return unix.Open("/proc/thread-self/fd/"+strconv.Itoa(fd), flags|unix.O_CLOEXEC, 0)
}

// Own makes the directory path (missing parents too, with mode) and, when
// acting as u switches (a root host), gives it to u if it is not u's yet:
// a folder that is new, made by hand, or from before the sandbox user is
// handed over whole, once (HandOver), so that what the host later does in
// it as u (User.Do) it may do. The report is the hand-over's (zero when
// none was needed). path is resolved: a symlink anywhere in it is refused.
func (u User) Own(ctx context.Context, path string, mode uint32) (WalkReport, error) {
	if err := MkdirAll(path, mode); err != nil {
		return WalkReport{}, fmt.Errorf("create %s: %w", path, err)
	}
	if !u.switches() {
		return WalkReport{}, nil
	}
	var st unix.Stat_t
	if err := Lstat(path, &st); err != nil {
		return WalkReport{}, fmt.Errorf("stat %s: %w", path, err)
	}
	if int(st.Uid) == u.UID && int(st.Gid) == u.GID {
		return WalkReport{}, nil
	}
	rep, err := HandOver(ctx, path, u.UID, u.GID, DefaultWalkLimits)
	if err != nil {
		return rep, fmt.Errorf("hand %s to the sandbox user: %w", path, err)
	}
	return rep, nil
}
