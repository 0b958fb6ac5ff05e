package sandbox

import (
	"fmt"

	elastic "github.com/elastic/go-seccomp-bpf"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// OCISeccomp is the filter a gVisor sandbox loads inside its own kernel
// (runsc --oci-seccomp): the bwrap filter's rules that runsc 2022-12-19
// applies as written. It answers every refusal with EPERM whatever
// errnoRet says, so a rule whose errno matters is left out: clone3's
// ENOSYS, on which libc falls back to clone (EPERM would fail every
// thread). It does not apply a rule of several "not equal" arguments as
// their conjunction (the socket rule refused AF_UNIX too), so the socket
// family and personality rules are left to gVisor's Sentry, which serves
// those calls itself. The terminal ioctls are left to it too. The rules
// on namespace flags load, one per flag.
func OCISeccomp() (*specs.LinuxSeccomp, error) {
	s := &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Architectures: []specs.Arch{specs.ArchX86_64}}
	eperm := uint(unix.EPERM)
	rule := func(names []string, args []specs.LinuxSeccompArg) {
		s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{Names: names, Action: specs.ActErrno, ErrnoRet: &eperm, Args: args})
	}
	for _, r := range seccompDeny {
		if r.Errno == unix.ENOSYS {
			continue
		}
		if len(r.Args) == 0 {
			rule(r.Names, nil)
			continue
		}
		// A BitsSet condition (any of the bits) becomes one rule per bit.
		var bits []uint64
		for _, c := range r.Args {
			switch c.Operation {
			case elastic.NotEqual:
				continue // see above
			case elastic.BitsSet:
				for b := uint64(1); b != 0 && b <= c.Value; b <<= 1 {
					if c.Value&b != 0 {
						bits = append(bits, b)
					}
				}
				if len(r.Args) > 1 {
					return nil, fmt.Errorf("seccomp rule for %v: a bit set with other conditions", r.Names)
				}
			default:
				return nil, fmt.Errorf("seccomp rule for %v: operation %s has no OCI form here", r.Names, c.Operation)
			}
		}
		for _, b := range bits {
			rule(r.Names, []specs.LinuxSeccompArg{{Index: uint(r.Args[0].Argument), Value: b, ValueTwo: b, Op: specs.OpMaskedEqual}})
		}
	}
	return s, nil
}
