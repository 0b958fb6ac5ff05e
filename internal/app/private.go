package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/beneath"
	"github.com/clawpen/clawpen/internal/config"
)

// While a run goes on, what its sandbox makes in its folder or session dir
// (a file setuid to the sandbox user, a world-writable directory) is on the
// host's disk until the strip after the run. So that no other host user can
// walk to it meanwhile, the parents of those trees are the host's alone:
// groups/ is 0710 root:<the sandbox user's group> on a root host (the host
// and, by name only, the sandbox user, as main's extra mount of the
// project or of groups/ may need) and 0700 on a host that is not root (its
// sandboxes are its own user); data/sessions is 0700. Sandboxes get their
// folders through the host's pins (root host: opened by root, bound by
// bwrap or the Docker engine) or as the host user itself, so neither
// backend needs more.

// privateModes are the modes and groups privateParents gives: the groups
// dir and data/sessions, on a root host with a sandbox group (gid > 0) or
// not.
func privateModes(gid int) (groupsMode uint32, groupsGID int) {
	switch {
	case os.Geteuid() != 0:
		return 0o700, -1
	case gid > 0:
		return 0o710, gid
	}
	return 0o700, 0
}

// privateParents makes the groups dir and data/sessions unreachable for
// other host users (see above); gid is the sandbox user's group (-1: none,
// or a host that is not root). A POSIX ACL on either, which could let a
// named user through whatever the mode says, is removed.
func privateParents(cfg config.Config, gid int) error {
	groupsMode, groupsGID := privateModes(gid)
	owner := -1
	if os.Geteuid() == 0 {
		owner = 0
	}
	for _, d := range []struct {
		path     string
		mode     uint32
		uid, gid int
	}{
		{cfg.GroupsDir, groupsMode, owner, groupsGID},
		{filepath.Join(cfg.DataDir, "sessions"), 0o700, owner, owner},
	} {
		if err := os.MkdirAll(d.path, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d.path, err)
		}
		// Resolved at start (config): a symlink in it now is a swap.
		fd, err := beneath.Open(d.path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		err = unix.Fchown(fd, d.uid, d.gid)
		if err == nil {
			err = unix.Fchmod(fd, d.mode)
		}
		if err == nil {
			if rerr := unix.Fremovexattr(fd, "system.posix_acl_access"); rerr != nil && !errors.Is(rerr, unix.ENODATA) && !errors.Is(rerr, unix.EOPNOTSUPP) {
				err = rerr
			}
		}
		_ = unix.Close(fd)
		if err != nil {
			return fmt.Errorf("make %s private to the host: %w", d.path, err)
		}
	}
	return nil
}

// privateFinding makes the parents private as serve does at start, then
// says whether another host user could still walk into them: a mode or
// owner that did not stick (a filesystem without Unix modes), or a user
// in the sandbox user's group.
func privateFinding(cfg config.Config, gid int) Finding {
	f := Finding{Name: "groups", Verdict: Fail}
	groupsMode, groupsGID := privateModes(gid)
	sessions := filepath.Join(cfg.DataDir, "sessions")
	want := fmt.Sprintf("%s %04o (group %d), %s 0700, owned by the host user", cfg.GroupsDir, groupsMode, groupsGID, sessions)
	f.Fix = "keep both on a local filesystem with Unix modes; serve makes them so at start: " + want
	if err := privateParents(cfg, gid); err != nil {
		f.Detail = err.Error() + "; other host users may reach what sandboxes write during a run"
		return f
	}
	var problems []string
	for _, d := range []struct {
		path string
		mode uint32
		gid  int
	}{{cfg.GroupsDir, groupsMode, groupsGID}, {sessions, 0o700, -1}} {
		var st unix.Stat_t
		if err := beneath.Lstat(d.path, &st); err != nil {
			problems = append(problems, err.Error())
		} else if int(st.Uid) != os.Geteuid() || st.Mode&0o7777 != d.mode || (d.gid >= 0 && int(st.Gid) != d.gid) {
			problems = append(problems, fmt.Sprintf("%s is %04o uid %d gid %d", d.path, st.Mode&0o7777, st.Uid, st.Gid))
		}
	}
	if groupsGID > 0 {
		if others := membersOf(groupsGID, cfg.SandboxUser); len(others) > 0 {
			problems = append(problems, fmt.Sprintf("%s, in the sandbox user's group %d, may walk into %s", strings.Join(others, ", "), groupsGID, cfg.GroupsDir))
			f.Fix = fmt.Sprintf("take them out of group %d (gpasswd -d <user> <group>; a user whose primary group it is needs another)", groupsGID)
		}
	}
	if len(problems) > 0 {
		f.Detail = strings.Join(problems, "; ") + ": other host users may reach what sandboxes write during a run"
		return f
	}
	f.Verdict, f.Fix = OK, ""
	f.Detail = want + ": no other host user reaches what sandboxes write"
	return f
}

// membersOf lists the users, besides except, in group gid: its listed
// members and the users whose primary group it is.
func membersOf(gid int, except string) []string {
	id := strconv.Itoa(gid)
	var users []string
	for _, f := range colonFile("/etc/group", 4) {
		if f[2] == id && f[3] != "" {
			users = append(users, strings.Split(f[3], ",")...)
		}
	}
	for _, f := range colonFile("/etc/passwd", 7) {
		if f[3] == id {
			users = append(users, f[0])
		}
	}
	slices.Sort(users)
	users = slices.Compact(users)
	return slices.DeleteFunc(users, func(u string) bool { return u == except || u == "" })
}

// colonFile is the lines of a colon-separated file (passwd, group) with n
// fields; nothing when it cannot be read.
func colonFile(path string, n int) [][]string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out [][]string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Split(line, ":"); len(f) == n {
			out = append(out, f)
		}
	}
	return out
}
