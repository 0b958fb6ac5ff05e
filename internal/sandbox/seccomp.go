// The system call filter every sandbox runs under: bwrap's --seccomp program
// (SeccompProgram) and, brought to the same refusals, Docker's profile
// (DockerSeccompProfile). The namespaces, the dropped capabilities and
// no_new_privs already refuse most of what is listed here; the filter keeps
// the kernel interfaces the sandbox has no use for out of its reach even when
// one of those layers has a hole: the kernel keyrings (shared with the host
// and every other sandbox), terminal input injection, new user namespaces,
// tracing, perf/BPF/userfaultfd/io_uring, mounts, and host administration.
// seccompDeny lists each rule and why; docs/decisions.md says how the set was
// chosen (Docker's default profile and Flatpak's as the references).
//
// It is a blocklist (everything else is allowed), generated with
// github.com/elastic/go-seccomp-bpf, plus a short hand-written prologue for
// what that library cannot express: a foreign ABI (i386 through int 0x80, or
// x32), which the library would send to the default action, i.e. allow, and
// an ioctl request compared on its low 32 bits only, as the kernel reads it.

package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"

	elastic "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompRule refuses a set of system calls, or calls whose arguments match.
type seccompRule struct {
	Why   string
	Names []string
	// Args, when set, refuses Names[0] only when every condition holds.
	Args  []elastic.Condition
	Errno unix.Errno // EPERM unless set
}

// cloneNamespaces are the clone(2) flags that create a namespace. CLONE_NEWTIME
// (0x80) is not among them: in clone(2) that bit belongs to the exit signal.
const cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// allowedPersonalities are the personality(2) values Docker's profile allows:
// PER_LINUX, PER_LINUX32, UNAME26 with each, and 0xffffffff (a query).
var allowedPersonalities = []uint64{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// allowedSocketFamilies are the address families a sandbox may create
// sockets of: local, IP (loopback only, in its network namespace) and
// netlink (to read its own interfaces). AF_VSOCK, for one, is not namespaced
// and reaches the hypervisor; AF_ALG and the rest are attack surface.
var allowedSocketFamilies = []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// seccompDeny is the filter's rule set. Syscall names are those of the
// library's table for the native architecture; an unknown name is an error
// when the filter is built, not a silent gap.
var seccompDeny = []seccompRule{
	{Why: "kernel keyrings: the host's session keyring, and a channel between sandboxes",
		Names: []string{"keyctl", "add_key", "request_key"}},
	{Why: "new user namespaces give a fresh set of capabilities over new mounts and the kernel's namespaced code",
		Names: []string{"clone"}, Args: []elastic.Condition{{Argument: 0, Operation: elastic.BitsSet, Value: cloneNamespaces}}},
	{Why: "new namespaces of any kind (bwrap built the sandbox's)",
		Names: []string{"unshare"}, Args: []elastic.Condition{{Argument: 0, Operation: elastic.BitsSet, Value: cloneNamespaces | unix.CLONE_NEWTIME}}},
	{Why: "clone3 passes its flags in memory a filter cannot read; ENOSYS makes libc fall back to clone",
		Names: []string{"clone3"}, Errno: unix.ENOSYS},
	{Why: "joining another namespace",
		Names: []string{"setns"}},
	{Why: "tracing and reading or writing another process's memory, descriptors or state",
		Names: []string{"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp"}},
	{Why: "kernel attack surface with no use in an agent sandbox",
		Names: []string{"perf_event_open", "bpf", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
			"lookup_dcookie", "fanotify_init", "modify_ldt", "uselib"}},
	{Why: "mounts and root changes",
		Names: []string{"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "open_tree_attr",
			"fsopen", "fsmount", "fsconfig", "fspick", "mount_setattr"}},
	{Why: "file handles open any inode of a file system, bypassing the mounts",
		Names: []string{"open_by_handle_at", "name_to_handle_at"}},
	{Why: "host administration",
		Names: []string{"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
			"reboot", "swapon", "swapoff", "acct", "syslog", "quotactl", "quotactl_fd", "vhangup",
			"settimeofday", "clock_settime", "clock_adjtime", "iopl", "ioperm", "nfsservctl"}},
	{Why: "personalities other than Linux's (e.g. ADDR_NO_RANDOMIZE turns off ASLR)",
		Names: []string{"personality"}, Args: notAny(allowedPersonalities)},
	{Why: "socket families other than local, IP and netlink",
		Names: []string{"socket"}, Args: notAny(allowedSocketFamilies), Errno: unix.EAFNOSUPPORT},
}

// seccompDeniedIoctls are terminal requests refused on any descriptor: TIOCSTI
// pushes input into the terminal a sandbox inherited, TIOCLINUX pastes the
// console's selection. The kernel reads the request as 32 bits, so only
// those are compared.
var seccompDeniedIoctls = []uint32{unix.TIOCSTI, unix.TIOCLINUX}

func notAny(values []uint64) []elastic.Condition {
	var cs []elastic.Condition
	for _, v := range values {
		cs = append(cs, elastic.Condition{Argument: 0, Operation: elastic.NotEqual, Value: v})
	}
	return cs
}

// maxBytes bounds the program: bwrap reads it from a pipe filled before bwrap
// starts, and a pipe is only sure to hold one page.
const maxBytes = 4096

// SeccompProgram assembles the filter for the native architecture as bwrap's
// --seccomp reads it: an array of struct sock_filter in native byte order.
func SeccompProgram() ([]byte, error) {
	insts, err := seccompInstructions()
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return nil, fmt.Errorf("assemble the seccomp filter: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.NativeEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.NativeEndian.AppendUint32(out, r.K)
	}
	if len(out) > maxBytes {
		return nil, fmt.Errorf("the seccomp filter has %d instructions, more than the %d a one-page pipe holds", len(raw), maxBytes/8)
	}
	return out, nil
}

// seccompInstructions is the filter before encoding: the prologue, then the
// library's program for seccompDeny.
func seccompInstructions() ([]bpf.Instruction, error) {
	native, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	policy := elastic.Policy{DefaultAction: elastic.ActionAllow}
	for _, r := range seccompDeny {
		g := elastic.SyscallGroup{Action: errnoAction(r.Errno)}
		switch {
		case len(r.Args) == 0:
			g.Names = r.Names
		case len(r.Names) == 1:
			g.NamesWithCondtions = []elastic.NameWithConditions{{Name: r.Names[0], Conditions: r.Args}}
		default:
			return nil, fmt.Errorf("seccomp rule %q: argument conditions apply to one system call", r.Why)
		}
		policy.Syscalls = append(policy.Syscalls, g)
	}
	body, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	ioctl, ok := native.SyscallNames["ioctl"]
	if !ok {
		return nil, errors.New("seccomp filter: no ioctl in the native system call table")
	}
	return append(prologue(native, uint32(ioctl)), body...), nil
}

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// prologue refuses a foreign ABI and the denied ioctl requests, then falls
// through to what follows it. The library checks the architecture too, but
// sends a mismatch to the default action, which for a blocklist is allow: a
// 64-bit process could then make any call through int 0x80.
func prologue(native *arch.Info, ioctl uint32) []bpf.Instruction {
	deny := bpf.RetConstant{Val: uint32(errnoAction(unix.EPERM))}
	// The low half of args[1], the request.
	reqOff := uint32(offArgs + 8*1)
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 { // big endian
		reqOff += 4
	}
	p := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(native.ID), SkipTrue: 1},
		deny,
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if runtime.GOARCH == "amd64" {
		// x32 shares x86_64's audit arch and marks its numbers with this bit.
		p = append(p,
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: uint32(arch.X32.SeccompMask), SkipFalse: 1},
			deny)
	}
	n := len(seccompDeniedIoctls)
	p = append(p,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: ioctl, SkipFalse: uint8(n + 2)},
		bpf.LoadAbsolute{Off: reqOff, Size: 4})
	for i, req := range seccompDeniedIoctls {
		last := i == n-1
		j := bpf.JumpIf{Cond: bpf.JumpEqual, Val: req, SkipTrue: uint8(n - 1 - i)}
		if last {
			j.SkipFalse = 1
		}
		p = append(p, j)
	}
	return append(p, deny)
}

func errnoAction(e unix.Errno) elastic.Action {
	if e == 0 {
		e = unix.EPERM
	}
	return elastic.ActionErrno | elastic.Action(e)
}
