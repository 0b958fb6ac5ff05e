package app

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/clawpen/clawpen/internal/beneath"
	"github.com/clawpen/clawpen/internal/config"
)

// ErrNoSandboxUser is wrapped when the sandbox user does not exist.
var ErrNoSandboxUser = errors.New("no such user")

// CreateUserCommand is the command that makes the dedicated sandbox user:
// a system account with its own group, no home and no login shell.
func CreateUserCommand(name string) string {
	return "useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin " + name
}

// SandboxUser is the host user sandboxes run as, and whose files what they
// write become. A host that is not root runs them as itself (-1, -1). A
// root host uses the dedicated user name (CLAWPEN_SANDBOX_USER, default
// clawpen-sandbox): a local account that is not root and has no login
// shell, so sandbox uid 1000 maps neither to root nor to a person's
// account. Without one the host runs no sandbox; the error says how to
// make it.
func SandboxUser(name string) (uid, gid int, err error) {
	if os.Geteuid() != 0 {
		return -1, -1, nil
	}
	f, err := os.Open("/etc/passwd")
	if err != nil {
		return -1, -1, fmt.Errorf("sandbox user %s: %w", name, err)
	}
	defer f.Close()
	return sandboxUserFrom(f, name)
}

// SandboxRights is the sandbox user named name as the host acts with its
// rights in the trees sandboxes write (beneath.User): the host's own on a
// host that is not root, or when there is no usable user (then no sandbox
// runs at all).
func SandboxRights(name string) beneath.User {
	uid, gid, err := SandboxUser(name)
	if err != nil {
		return beneath.User{}
	}
	return beneath.User{UID: uid, GID: gid}
}

// sandboxUserFrom looks name up in a passwd file and checks that it is fit
// to run sandboxes.
func sandboxUserFrom(passwd io.Reader, name string) (uid, gid int, err error) {
	if name == "" || strings.ContainsAny(name, ":\n/ ") {
		return -1, -1, fmt.Errorf("sandbox user %q (CLAWPEN_SANDBOX_USER) is not a user name", name)
	}
	sc := bufio.NewScanner(passwd)
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) != 7 || f[0] != name {
			continue
		}
		uid, uerr := strconv.Atoi(f[2])
		gid, gerr := strconv.Atoi(f[3])
		switch {
		case uerr != nil || gerr != nil:
			return -1, -1, fmt.Errorf("sandbox user %s: malformed /etc/passwd entry", name)
		case uid == 0 || gid == 0:
			return -1, -1, fmt.Errorf("sandbox user %s is uid %d gid %d: it must not be root nor in root's group; create a dedicated user: %s",
				name, uid, gid, CreateUserCommand(config.DefaultSandboxUser))
		case !noLogin(f[6]):
			return -1, -1, fmt.Errorf("sandbox user %s has the login shell %q: what sandboxes write must never belong to a person's account; "+
				"give it no login (usermod --shell /usr/sbin/nologin %s) or name a dedicated user in CLAWPEN_SANDBOX_USER", name, f[6], name)
		}
		return uid, gid, nil
	}
	if err := sc.Err(); err != nil {
		return -1, -1, fmt.Errorf("read /etc/passwd: %w", err)
	}
	return -1, -1, fmt.Errorf("sandbox user %s: %w: a root host runs sandboxes only as a dedicated user; create it with: %s",
		name, ErrNoSandboxUser, CreateUserCommand(name))
}

// noLogin reports whether shell refuses logins. An empty shell field means
// /bin/sh.
func noLogin(shell string) bool {
	switch path.Base(shell) {
	case "nologin", "false":
		return true
	}
	return false
}
