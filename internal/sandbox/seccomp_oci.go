package sandbox

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// OCISeccomp is the filter a gVisor sandbox loads inside its own kernel
// (runsc --oci-seccomp): every call the bwrap filter refuses with EPERM
// whatever its arguments. runsc 2022-12-19 answers every refusal with
// EPERM whatever errnoRet says, so the rules with another errno (clone3's
// ENOSYS, on which libc falls back to clone) are left out, as are the rules
// on arguments (clone and unshare flags, personality, socket families,
// terminal ioctls): gVisor's Sentry serves those calls itself, and none
// reaches the host kernel.
func OCISeccomp() *specs.LinuxSeccomp {
	s := &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Architectures: []specs.Arch{specs.ArchX86_64}}
	eperm := uint(unix.EPERM)
	for _, r := range seccompDeny {
		if len(r.Args) > 0 || (r.Errno != 0 && r.Errno != unix.EPERM) {
			continue
		}
		s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{Names: r.Names, Action: specs.ActErrno, ErrnoRet: &eperm})
	}
	return s
}
