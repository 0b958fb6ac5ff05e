package bwrap

import (
	"path"
	"strconv"
	"strings"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// AgentPath is where the agent binary appears inside the sandbox.
const AgentPath = "/opt/clawpen/bin/clawpen-agent"

// fdLayout numbers every file descriptor the command line refers to. ExtraFiles[i]
// becomes fd 3+i in the child, so the order here is the order prepare opens files in.
type fdLayout struct {
	etc    []int // one per etcFiles entry
	info   int
	block  int // --block-fd: the sandbox waits here until the host has set its limits
	group  int
	global int // -1 when no GlobalDir
	home   int // -1 when no SessionDir
	socket int // -1 when no SocketPath
	bundle int // -1 when no CABundle
	agent  int // -1 when a Command override is used
	extra  []int
	// writable[i][j] is the fd of spec.Extra[i].Writable[j]
	writable [][]int
	seccomp  int // --seccomp: the filter program, after the others so they keep their numbers
	sync     int // --sync-fd: the init's own write end of --block-fd (see gate)
	count    int
}

func (b *Backend) layoutFor(spec sandbox.Spec) fdLayout {
	next := 3
	take := func() int { next++; return next - 1 }
	var l fdLayout
	for range sandbox.EtcFiles {
		l.etc = append(l.etc, take())
	}
	l.info = take()
	l.block = take()
	l.group = take()
	l.global, l.home, l.socket, l.bundle, l.agent = -1, -1, -1, -1, -1
	if spec.GlobalDir != "" {
		l.global = take()
	}
	if spec.SessionDir != "" {
		l.home = take()
	}
	if spec.SocketPath != "" {
		l.socket = take()
	}
	if spec.CABundle != "" {
		l.bundle = take()
	}
	if b.cfg.AgentBin != "" {
		l.agent = take()
	}
	for _, m := range spec.Extra {
		l.extra = append(l.extra, take())
		var w []int
		for range m.Writable {
			w = append(w, take())
		}
		l.writable = append(l.writable, w)
	}
	l.seccomp = take()
	l.sync = take()
	l.count = next - 3
	return l
}

// Args is the bubblewrap command line (without the bwrap binary itself) that Run
// uses for spec. File descriptors from 3 on are referenced in a fixed order (etc
// data, info, block, group, global, home, socket, CA bundle, agent, extras, seccomp, sync); Run opens and passes
// them. With no command the agent (or Config.Command) is run. Exported so a
// benchmark can time clawpen's exact flags.
func (b *Backend) Args(spec sandbox.Spec, command ...string) []string {
	return b.args(spec, b.layoutFor(spec), command)
}

func (b *Backend) args(spec sandbox.Spec, fds fdLayout, command []string) []string {
	lim := spec.Limits.WithDefaults()
	fd := strconv.Itoa
	a := []string{
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--uid", fd(sandbox.UID), "--gid", fd(sandbox.GID),
		"--hostname", sandbox.Hostname,
		"--clearenv",
	}
	for _, kv := range sandbox.Environ(spec.Env) {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}

	// System: /usr read-only, the root-level aliases as on the host.
	a = append(a, "--ro-bind", "/usr", "/usr")
	for _, l := range b.host.RootLinks {
		a = append(a, "--symlink", l[0], l[1])
	}
	for _, d := range b.host.RootBinds {
		a = append(a, "--ro-bind", d, d)
	}
	// bwrap's --dev is an unsized tmpfs the sandbox user owns: /dev/shm gets
	// a sized tmpfs of its own and the rest of /dev is read-only (the device
	// nodes are separate binds and still work).
	a = append(a, "--proc", "/proc", "--dev", "/dev",
		"--size", strconv.FormatInt(lim.ShmBytes, 10), "--perms", "1777", "--tmpfs", "/dev/shm", "--remount-ro", "/dev")
	// As Docker does: /proc/keys would list the keys the sandbox user may
	// view, the host account's included.
	a = append(a, "--ro-bind", "/dev/null", "/proc/keys")

	// A synthesised /etc: nothing of the host's configuration but CA certificates
	// and the time zone.
	a = append(a, "--perms", "0755", "--dir", "/etc")
	for i, f := range sandbox.EtcFiles {
		a = append(a, "--perms", "0644", "--ro-bind-data", fd(fds.etc[i]), f.Dest)
	}
	for _, d := range b.host.EtcBinds {
		a = append(a, "--ro-bind", d, d)
	}
	if b.host.HasLocal {
		if b.host.Localtime != "" {
			a = append(a, "--symlink", b.host.Localtime, "/etc/localtime")
		} else {
			a = append(a, "--ro-bind", "/etc/localtime", "/etc/localtime")
		}
	}

	a = append(a, "--size", strconv.FormatInt(lim.TmpBytes, 10), "--perms", "1777", "--tmpfs", "/tmp")

	// The workspace: every host directory is bound through an fd opened without
	// following a final symlink, so a swap after validation cannot redirect it.
	a = append(a, "--perms", "0755", "--dir", "/workspace")
	a = append(a, "--bind-fd", fd(fds.group), domain.GroupPath)
	if fds.global >= 0 {
		flag := "--ro-bind-fd"
		if spec.GlobalWritable {
			flag = "--bind-fd"
		}
		a = append(a, flag, fd(fds.global), domain.GlobalPath)
	}
	if len(spec.Extra) > 0 {
		a = append(a, "--perms", "0755", "--dir", domain.ExtraPath)
		for i, m := range spec.Extra {
			flag := "--ro-bind-fd"
			if !m.ReadOnly {
				flag = "--bind-fd"
			}
			dest := domain.ExtraPath + "/" + m.Name
			a = append(a, flag, fd(fds.extra[i]), dest)
			for j, w := range m.Writable {
				a = append(a, "--bind-fd", fd(fds.writable[i][j]), sandbox.TargetFor(dest, m.HostPath, w))
			}
			for _, mask := range m.Masks {
				a = append(a, maskArgs(sandbox.TargetFor(dest, m.HostPath, mask), mask)...)
			}
		}
	}
	a = append(a, "--perms", "0755", "--dir", "/home")
	if fds.home >= 0 {
		a = append(a, "--bind-fd", fd(fds.home), domain.HomePath)
	} else {
		a = append(a, "--size", strconv.FormatInt(lim.TmpBytes, 10), "--perms", "0700", "--tmpfs", domain.HomePath)
	}
	a = append(a, "--perms", "0755", "--dir", "/run", "--perms", "0755", "--dir", path.Dir(domain.SocketPath))
	if fds.socket >= 0 {
		a = append(a, "--bind-fd", fd(fds.socket), domain.SocketPath)
	}
	if fds.bundle >= 0 {
		a = append(a, "--ro-bind-fd", fd(fds.bundle), domain.CABundlePath)
	}
	if fds.agent >= 0 {
		a = append(a,
			"--perms", "0755", "--dir", "/opt",
			"--perms", "0755", "--dir", "/opt/clawpen",
			"--perms", "0755", "--dir", path.Dir(AgentPath),
			"--ro-bind-fd", fd(fds.agent), AgentPath)
	}

	// Nothing else may be created at the root once the view is built.
	a = append(a, "--remount-ro", "/")
	// bwrap loads the filter (after no_new_privs) into the namespace's
	// init and the command, right before exec.
	if !b.baseline {
		a = append(a, "--seccomp", fd(fds.seccomp))
	}
	a = append(a, "--info-fd", fd(fds.info), "--block-fd", fd(fds.block), "--sync-fd", fd(fds.sync), "--chdir", domain.GroupPath, "--")
	if len(command) == 0 {
		command = b.defaultCommand()
	}
	return append(a, command...)
}

// command is what runs inside the sandbox by default.
func (b *Backend) defaultCommand() []string {
	if len(b.cfg.Command) > 0 {
		return b.cfg.Command
	}
	return []string{AgentPath}
}

// maskArgs hides hostPath at dest: an empty read-only tmpfs over a directory,
// /dev/null over anything else. A path gone since it was listed needs nothing.
func maskArgs(dest, hostPath string) []string {
	dir, ok := sandbox.MaskDir(hostPath)
	switch {
	case !ok:
		return nil
	case dir:
		return []string{"--perms", "0555", "--tmpfs", dest, "--remount-ro", dest}
	default:
		return []string{"--ro-bind", "/dev/null", dest}
	}
}
