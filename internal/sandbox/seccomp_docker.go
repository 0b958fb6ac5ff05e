package sandbox

import (
	"encoding/json"
	"fmt"
	"slices"

	mobyseccomp "github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// DockerSeccompProfile is the seccomp profile Docker sandboxes run under, as
// HostConfig.SecurityOpt takes it ("seccomp=" + profile). It is Docker's
// default profile (moby/profiles), an allowlist, brought to what the bwrap
// filter refuses:
//   - every call seccompDeny refuses unconditionally is taken out of the
//     allowlist (Docker's allows ptrace and, in engines before 25, io_uring);
//   - socket(2) is allowed for allowedSocketFamilies only (Docker's engines
//     before 29 allow AF_VSOCK, which reaches the hypervisor);
//   - only the native architecture is allowed: Docker's adds the 32-bit ABIs
//     with the same list, and i386's socketcall(2) hides the socket family
//     from any filter.
//
// Docker's own rules already cover the conditional ones (clone and unshare
// with namespace flags, clone3, personality). ioctl is allowed by rules
// that together match every request but TIOCSTI and TIOCLINUX
// (ioctlAllowMasks): `clawpen run` gives a Docker sandbox a terminal, and
// libseccomp, through runc, drops a refusing rule beside an unconditional
// allow, nor can one rule hold two comparisons of the same argument.
func DockerSeccompProfile() (string, error) {
	p := mobyseccomp.DefaultProfile()
	denied := map[string]bool{}
	for _, r := range seccompDeny {
		if len(r.Args) == 0 {
			for _, n := range r.Names {
				denied[n] = true
			}
		}
	}
	var rules []*mobyseccomp.Syscall
	for _, s := range p.Syscalls {
		if s.Action == specs.ActAllow && slices.Contains(s.Names, "socket") {
			continue
		}
		if s.Action == specs.ActAllow {
			s.Names = slices.DeleteFunc(slices.Clone(s.Names), func(n string) bool { return denied[n] || (n == "ioctl" && len(s.Args) == 0) })
			if len(s.Names) == 0 {
				continue
			}
		}
		rules = append(rules, s)
	}
	for _, f := range allowedSocketFamilies {
		rules = append(rules, &mobyseccomp.Syscall{LinuxSyscall: specs.LinuxSyscall{
			Names:  []string{"socket"},
			Action: specs.ActAllow,
			Args:   []specs.LinuxSeccompArg{{Index: 0, Value: f, Op: specs.OpEqualTo}},
		}})
	}
	// ioctl is allowed for every request but the denied terminal ones.
	for _, m := range ioctlAllowMasks(seccompDeniedIoctls[0], seccompDeniedIoctls[1]) {
		rules = append(rules, &mobyseccomp.Syscall{LinuxSyscall: specs.LinuxSyscall{
			Names: []string{"ioctl"}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 1, Value: m[0], ValueTwo: m[1], Op: specs.OpMaskedEqual}},
		}})
	}
	p.Syscalls = rules
	for i := range p.ArchMap {
		p.ArchMap[i].SubArches = nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encode the Docker seccomp profile: %w", err)
	}
	return string(b), nil
}

// ioctlAllowMasks are (mask, value) pairs for SCMP_CMP_MASKED_EQ on the
// request, any of which matching means the request is neither a nor b; every
// other request matches one. Only the low 32 bits are compared: all the
// kernel reads. A request differs from both when one bit that a and b share
// differs, or when one bit differs from a and another from b (among the bits
// where a and b differ: matching both on the shared bits, it is made of a's
// and b's bits there, and is neither only if it takes some of each).
func ioctlAllowMasks(a, b uint32) [][2]uint64 {
	var out [][2]uint64
	for i := range 32 {
		bit := uint32(1) << i
		if a&bit == b&bit {
			out = append(out, [2]uint64{uint64(bit), uint64(^a & bit)})
		}
	}
	for i := range 32 {
		for j := range 32 {
			bi, bj := uint32(1)<<i, uint32(1)<<j
			if i == j || a&bi == b&bi || a&bj == b&bj {
				continue
			}
			out = append(out, [2]uint64{uint64(bi | bj), uint64(^a&bi | ^b&bj)})
		}
	}
	return out
}
