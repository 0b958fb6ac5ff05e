package sandbox

import (
	"os"
	"path"
	"sort"

	"github.com/clawpen/clawpen/internal/domain"
)

// Hostname is every sandbox's UTS name.
const Hostname = "clawpen"

// PATH is the only PATH an agent gets.
const PATH = "/usr/local/bin:/usr/bin:/bin"

// EtcFiles are the synthesised /etc files of the backends that show the
// host's system dirs (bwrap, gVisor): the host's /etc is never shown.
var EtcFiles = []struct{ Dest, Content string }{
	{"/etc/passwd", "agent:x:1000:1000:agent:/home/agent:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
	{"/etc/group", "agent:x:1000:\nnogroup:x:65534:\n"},
	{"/etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + Hostname + "\n"},
	{"/etc/nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"},
}

// HostSystem is what of the host's root a bwrap or gVisor sandbox sees
// besides /usr, read-only: computed once by ProbeHostSystem, so that a
// backend's view stays a pure function of the spec.
type HostSystem struct {
	RootLinks [][2]string // {target, /name}: merged-/usr symlinks
	RootBinds []string    // non-merged system dirs, ro-bound at the same path
	EtcBinds  []string    // /etc/ssl/certs, /etc/ca-certificates, /etc/alternatives when present
	Localtime string      // symlink target of /etc/localtime, or "" to ro-bind it
	HasLocal  bool        // /etc/localtime exists
}

// ProbeHostSystem inspects the host's system directories.
func ProbeHostSystem() HostSystem {
	var l HostSystem
	for _, dir := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(dir)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(dir)
			if err != nil {
				continue
			}
			l.RootLinks = append(l.RootLinks, [2]string{target, dir})
			continue
		}
		if fi.IsDir() {
			l.RootBinds = append(l.RootBinds, dir)
		}
	}
	// /etc/alternatives holds only symlinks to programs (Debian's awk, editor,
	// pager…); without it /usr/bin/awk would dangle inside the sandbox.
	for _, dir := range []string{"/etc/ssl/certs", "/etc/ca-certificates", "/etc/alternatives"} {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			l.EtcBinds = append(l.EtcBinds, dir)
		}
	}
	if fi, err := os.Lstat("/etc/localtime"); err == nil {
		l.HasLocal = true
		if fi.Mode()&os.ModeSymlink != 0 {
			if target, err := os.Readlink("/etc/localtime"); err == nil && path.IsAbs(target) {
				l.Localtime = target
			}
		}
	}
	return l
}

// Environ is a sandbox's whole environment, "NAME=value" sorted by name:
// env's variables of a valid name, then HOME, USER and PATH, always the
// sandbox's own.
func Environ(env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		if ValidEnvName(k) && k != "HOME" && k != "USER" && k != "PATH" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys)+3)
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return append(out, "HOME="+domain.HomePath, "USER=agent", "PATH="+PATH)
}
