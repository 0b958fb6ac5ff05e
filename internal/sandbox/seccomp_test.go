package sandbox

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"unsafe"

	"github.com/elastic/go-seccomp-bpf/arch"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

const (
	retAllow = 0x7fff0000
	retErrno = 0x00050000
	// addrNoRandomize is the personality flag that turns off ASLR.
	addrNoRandomize = 0x0040000
)

// call is one system call as the filter sees it (struct seccomp_data).
type call struct {
	name string
	arch uint32
	nr   uint32
	args [6]uint64
}

// packet lays c out for x/net/bpf's VM, which loads words big endian: each
// word goes where the kernel would load it from, in the VM's byte order.
func (c call) packet() []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[offNr:], c.nr)
	binary.BigEndian.PutUint32(b[offArch:], c.arch)
	for i, a := range c.args {
		lo, hi := offArgs+8*i, offArgs+8*i+4
		if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
			lo, hi = hi, lo
		}
		binary.BigEndian.PutUint32(b[lo:], uint32(a))
		binary.BigEndian.PutUint32(b[hi:], uint32(a>>32))
	}
	return b
}

func native(t *testing.T, name string, args ...uint64) call {
	t.Helper()
	info, err := arch.GetInfo("")
	require.NoError(t, err)
	nr, ok := info.SyscallNames[name]
	require.True(t, ok, "no %s on this architecture", name)
	c := call{name: name, arch: uint32(info.ID), nr: uint32(nr)}
	copy(c.args[:], args)
	return c
}

func errno(e unix.Errno) uint32 { return retErrno | uint32(e) }

// TestFilterDecisions runs the assembled program in a BPF interpreter, one
// row per rule and the calls next to each that must stay allowed.
func TestFilterDecisions(t *testing.T) {
	insts, err := seccompInstructions()
	require.NoError(t, err)
	vm, err := bpf.NewVM(insts)
	require.NoError(t, err)

	tests := []struct {
		c    call
		want uint32
	}{
		{native(t, "read"), retAllow},
		{native(t, "write"), retAllow},
		{native(t, "execve"), retAllow},
		{native(t, "keyctl", unix.KEYCTL_READ), errno(unix.EPERM)},
		{native(t, "add_key"), errno(unix.EPERM)},
		{native(t, "request_key"), errno(unix.EPERM)},
		{native(t, "clone", unix.CLONE_NEWUSER), errno(unix.EPERM)},
		{native(t, "clone", unix.CLONE_NEWNS|unix.CLONE_VM), errno(unix.EPERM)},
		{native(t, "clone", unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|unix.CLONE_THREAD), retAllow},
		{native(t, "clone", uint64(unix.SIGCHLD)), retAllow},
		{native(t, "unshare", unix.CLONE_NEWUSER), errno(unix.EPERM)},
		{native(t, "unshare", unix.CLONE_NEWTIME), errno(unix.EPERM)},
		{native(t, "unshare", unix.CLONE_FILES), retAllow},
		{native(t, "clone3"), errno(unix.ENOSYS)},
		{native(t, "setns"), errno(unix.EPERM)},
		{native(t, "ptrace", unix.PTRACE_ATTACH), errno(unix.EPERM)},
		{native(t, "process_vm_readv"), errno(unix.EPERM)},
		{native(t, "process_vm_writev"), errno(unix.EPERM)},
		{native(t, "perf_event_open"), errno(unix.EPERM)},
		{native(t, "bpf"), errno(unix.EPERM)},
		{native(t, "userfaultfd"), errno(unix.EPERM)},
		{native(t, "io_uring_setup"), errno(unix.EPERM)},
		{native(t, "kexec_load"), errno(unix.EPERM)},
		{native(t, "kexec_file_load"), errno(unix.EPERM)},
		{native(t, "finit_module"), errno(unix.EPERM)},
		{native(t, "mount"), errno(unix.EPERM)},
		{native(t, "umount2"), errno(unix.EPERM)},
		{native(t, "pivot_root"), errno(unix.EPERM)},
		{native(t, "fsopen"), errno(unix.EPERM)},
		{native(t, "open_tree"), errno(unix.EPERM)},
		{native(t, "mount_setattr"), errno(unix.EPERM)},
		{native(t, "open_by_handle_at"), errno(unix.EPERM)},
		{native(t, "reboot"), errno(unix.EPERM)},
		{native(t, "swapon"), errno(unix.EPERM)},
		{native(t, "syslog"), errno(unix.EPERM)},
		{native(t, "clock_settime"), errno(unix.EPERM)},
		{native(t, "clock_gettime"), retAllow},
		{native(t, "iopl"), errno(unix.EPERM)},
		{native(t, "personality", 0xffffffff), retAllow},
		{native(t, "personality", 0), retAllow},
		{native(t, "personality", addrNoRandomize), errno(unix.EPERM)},
		{native(t, "personality", 1<<32), errno(unix.EPERM)},
		{native(t, "socket", unix.AF_UNIX, unix.SOCK_STREAM), retAllow},
		{native(t, "socket", unix.AF_INET, unix.SOCK_STREAM), retAllow},
		{native(t, "socket", unix.AF_INET6, unix.SOCK_DGRAM), retAllow},
		{native(t, "socket", unix.AF_NETLINK, unix.SOCK_RAW), retAllow},
		{native(t, "socket", unix.AF_VSOCK, unix.SOCK_STREAM), errno(unix.EAFNOSUPPORT)},
		{native(t, "socket", unix.AF_ALG, unix.SOCK_SEQPACKET), errno(unix.EAFNOSUPPORT)},
		{native(t, "socket", 1<<32|unix.AF_UNIX), errno(unix.EAFNOSUPPORT)},
		{native(t, "ioctl", 0, unix.TIOCSTI), errno(unix.EPERM)},
		{native(t, "ioctl", 0, unix.TIOCLINUX), errno(unix.EPERM)},
		// The kernel truncates the request to 32 bits; so does the filter.
		{native(t, "ioctl", 0, 1<<32|unix.TIOCSTI), errno(unix.EPERM)},
		{native(t, "ioctl", 0, unix.TCGETS), retAllow},
		{native(t, "ioctl", 0, unix.TIOCGWINSZ), retAllow},
	}
	if runtime.GOARCH == "amd64" {
		tests = append(tests,
			// int 0x80 from a 64-bit process: i386 numbers, i386 audit arch.
			struct {
				c    call
				want uint32
			}{call{name: "i386 keyctl", arch: uint32(arch.I386.ID), nr: uint32(arch.I386.SyscallNames["keyctl"])}, errno(unix.EPERM)},
			struct {
				c    call
				want uint32
			}{call{name: "i386 getpid", arch: uint32(arch.I386.ID), nr: uint32(arch.I386.SyscallNames["getpid"])}, errno(unix.EPERM)},
			struct {
				c    call
				want uint32
			}{call{name: "x32 read", arch: uint32(arch.X86_64.ID), nr: uint32(arch.X32.SyscallNames["read"] | arch.X32.SeccompMask)}, errno(unix.EPERM)},
		)
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s %#x", tc.c.name, tc.c.args[:2]), func(t *testing.T) {
			got, err := vm.Run(tc.c.packet())
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprintf("%#x", tc.want), fmt.Sprintf("%#x", uint32(got)))
		})
	}
}

func TestEveryRuleNameIsKnown(t *testing.T) {
	info, err := arch.GetInfo("")
	require.NoError(t, err)
	for _, r := range seccompDeny {
		for _, n := range r.Names {
			_, ok := info.SyscallNames[n]
			assert.True(t, ok, "%s", n)
		}
	}
}

func TestProgramFitsOnePage(t *testing.T) {
	p, err := SeccompProgram()
	require.NoError(t, err)
	assert.LessOrEqual(t, len(p), 4096)
	assert.Zero(t, len(p)%8)
}

// childEnv makes the test binary, run again, load the filter and report.
const childEnv = "CLAWPEN_SECCOMP_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(filteredChild())
	}
	os.Exit(m.Run())
}

// filteredChild loads the filter on every thread and tries each call for
// real, printing call → errno as JSON.
func filteredChild() int {
	prog, err := SeccompProgram()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Println(err)
		return 1
	}
	fprog := unix.SockFprog{Len: uint16(len(prog) / 8), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		fmt.Println("load:", e)
		return 1
	}
	res := map[string]string{}
	try := func(name string, nr uintptr, a ...uintptr) {
		var args [6]uintptr
		copy(args[:], a)
		r, _, e := unix.Syscall6(nr, args[0], args[1], args[2], args[3], args[4], args[5])
		res[name] = e.Error()
		if e == 0 {
			res[name] = "ok"
			if name[:6] == "socket" {
				_ = unix.Close(int(r))
			}
		}
	}
	try("keyctl", unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(^uint32(0)-2)) // KEY_SPEC_SESSION_KEYRING
	try("add_key", unix.SYS_ADD_KEY)
	try("unshare user", unix.SYS_UNSHARE, unix.CLONE_NEWUSER)
	try("clone3", unix.SYS_CLONE3)
	try("getpid", unix.SYS_GETPID)
	try("personality query", unix.SYS_PERSONALITY, 0xffffffff)
	try("personality no-aslr", unix.SYS_PERSONALITY, addrNoRandomize)
	try("socket vsock", unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM)
	try("socket unix", unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM)
	c := byte('x')
	try("ioctl tiocsti high bits", unix.SYS_IOCTL, 0, 1<<32|unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
	try("ioctl tcgets", unix.SYS_IOCTL, 1<<20, unix.TCGETS, uintptr(unsafe.Pointer(&c))) // EBADF: not refused
	try("perf_event_open", unix.SYS_PERF_EVENT_OPEN)
	try("userfaultfd", unix.SYS_USERFAULTFD, 1) // UFFD_USER_MODE_ONLY
	try("io_uring_setup", unix.SYS_IO_URING_SETUP)
	try("ptrace", unix.SYS_PTRACE, unix.PTRACE_ATTACH, uintptr(os.Getppid()))
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// TestKernelAppliesFilter loads the program into a real process: the kernel
// accepts it and refuses what it should, for the reason it should.
func TestKernelAppliesFilter(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.Output()
	require.NoError(t, err, "%s", out)
	var got map[string]string
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	eperm, enosys := unix.EPERM.Error(), unix.ENOSYS.Error()
	assert.Equal(t, map[string]string{
		"keyctl":                  eperm,
		"add_key":                 eperm,
		"unshare user":            eperm, // without the filter: EINVAL (a multi-threaded process)
		"clone3":                  enosys,
		"getpid":                  "ok",
		"personality query":       "ok",
		"personality no-aslr":     eperm,
		"socket vsock":            unix.EAFNOSUPPORT.Error(),
		"socket unix":             "ok",
		"ioctl tiocsti high bits": eperm,
		"ioctl tcgets":            unix.EBADF.Error(),
		"perf_event_open":         eperm,
		"userfaultfd":             eperm,
		"io_uring_setup":          eperm,
		"ptrace":                  eperm,
	}, got)
}
