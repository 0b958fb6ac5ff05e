package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Checks of the kernel interfaces a sandbox's seccomp filter (or Docker's
// profile) must keep out of reach.
func init() {
	checks["keyring-read"] = func(args []string) { keyringRead(arg(args, 0)) }
	checks["keyring-plant"] = func(args []string) { keyringPlant(arg(args, 0), arg(args, 1)) }
	checks["keyctl"] = func([]string) { keyctlDirect() }
	checks["trace"] = func(args []string) {
		pid, err := strconv.Atoi(arg(args, 1))
		if err != nil {
			fmt.Println("usage: pwn trace LABEL PID")
			os.Exit(2)
		}
		trace(arg(args, 0), pid)
	}
	checks["bpf"] = func([]string) { bpfMap() }
	checks["perf"] = func([]string) { perfEvent() }
	checks["userfaultfd"] = func([]string) {
		// UFFD_USER_MODE_ONLY: what an unprivileged process may open when
		// vm.unprivileged_userfaultfd is 0.
		fd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|1, 0, 0)
		closeOK(int(fd), errnoErr(e))
		verdict("USERFAULTFD", errnoErr(e))
	}
	checks["io-uring"] = func([]string) {
		var params [120]byte // struct io_uring_params
		fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
		closeOK(int(fd), errnoErr(e))
		verdict("IO-URING", errnoErr(e))
	}
	checks["sockets"] = func([]string) {
		for _, s := range []struct {
			name   string
			family int
			typ    int
		}{{"VSOCK", unix.AF_VSOCK, unix.SOCK_STREAM}, {"ALG", unix.AF_ALG, unix.SOCK_SEQPACKET}} {
			fd, err := unix.Socket(s.family, s.typ, 0)
			if err == nil {
				_ = unix.Close(fd)
			}
			verdict("SOCKET-"+s.name, err)
		}
	}
	checks["newmount"] = func([]string) {
		fd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
		closeOK(fd, err)
		verdict("FSOPEN", err)
		fd, err = unix.OpenTree(unix.AT_FDCWD, "/tmp", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		closeOK(fd, err)
		verdict("OPEN-TREE", err)
	}
	checks["personality"] = func([]string) {
		// ADDR_NO_RANDOMIZE: turn address-space randomisation off.
		_, _, e := unix.Syscall(unix.SYS_PERSONALITY, 0x0040000, 0, 0)
		verdict("PERSONALITY-NO-ASLR", errnoErr(e))
	}
}

func arg(args []string, i int) string {
	if i >= len(args) {
		fmt.Println("missing argument", i+1)
		os.Exit(2)
	}
	return args[i]
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// closeOK closes what a check opened when the call worked.
func closeOK(fd int, err error) {
	if err == nil {
		_ = unix.Close(fd)
	}
}

// keyrings are the ones a process reaches without knowing an id.
var keyrings = []struct {
	name string
	id   int
}{
	{"session", unix.KEY_SPEC_SESSION_KEYRING},
	{"user", unix.KEY_SPEC_USER_KEYRING},
	{"user-session", unix.KEY_SPEC_USER_SESSION_KEYRING},
	{"process", unix.KEY_SPEC_PROCESS_KEYRING},
	{"thread", unix.KEY_SPEC_THREAD_KEYRING},
}

// keyringRead looks for the "user" key named desc in every keyring the
// process reaches, prints its payload when found, and looks for it in
// /proc/keys (which lists every key the process may view).
func keyringRead(desc string) {
	found := false
	for _, k := range keyrings {
		id, err := unix.KeyctlSearch(k.id, "user", desc, 0)
		if err != nil {
			fmt.Printf("search %s keyring: %v\n", k.name, err)
			continue
		}
		found = true
		buf := make([]byte, 512)
		n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
		if err != nil {
			fmt.Printf("KEY found in the %s keyring (id %d), read: %v\n", k.name, id, err)
			continue
		}
		fmt.Printf("KEY found in the %s keyring (id %d), payload: %s\n", k.name, id, buf[:min(n, len(buf))])
	}
	if found {
		fmt.Println("KEYRING-SEARCH" + breach)
	} else {
		fmt.Println("KEYRING-SEARCH" + held)
	}
	procKeys(desc)
}

// Verdict suffixes, as verdict prints them.
const (
	held   = "=HELD"
	breach = "=BREACH"
)

func procKeys(desc string) {
	f, err := os.Open("/proc/keys")
	if err != nil {
		verdict("PROC-KEYS", err)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	seen, lines := false, 0
	for sc.Scan() {
		lines++
		if strings.Contains(sc.Text(), desc) {
			seen = true
			fmt.Println("in /proc/keys:", sc.Text())
		}
	}
	fmt.Printf("/proc/keys: %d lines\n", lines)
	if seen {
		fmt.Println("PROC-KEYS" + breach)
	} else {
		fmt.Println("PROC-KEYS" + held)
	}
}

// keyringPlant adds a key to every keyring it can reach, for a later run of
// another group to find. What worked is only reported: the finding is the
// other group's.
func keyringPlant(desc, payload string) {
	for _, k := range keyrings[:3] {
		id, err := unix.AddKey("user", desc, []byte(payload), k.id)
		if err == nil {
			// Readable by anyone who can see it, possessor or not.
			err = unix.KeyctlSetperm(id, 0x3f3f3f3f)
		}
		fmt.Printf("plant in the %s keyring: %v\n", k.name, err)
	}
	fmt.Println("PLANT-DONE")
}

// keyctlDirect makes each keyring system call once.
func keyctlDirect() {
	_, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, true)
	verdict("KEYCTL", err)
	id, err := unix.AddKey("user", "clawpen-pwn-probe", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
	verdict("ADD-KEY", err)
	if err == nil {
		_, _ = unix.KeyctlInt(unix.KEYCTL_REVOKE, id, 0, 0, 0)
	}
	// Not found (ENOKEY) means the call itself was allowed.
	_, err = unix.RequestKey("user", "clawpen-pwn-absent", "", unix.KEY_SPEC_PROCESS_KEYRING)
	if err != nil && !refused(err) {
		fmt.Printf("REQUEST-KEY reached the kernel: %v\n", err)
		err = nil
	}
	verdict("REQUEST-KEY", err)
}

// refused is an error from a filter or a missing privilege, not from the
// call's own work.
func refused(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOSYS)
}

// trace tries to attach to, read the memory of, and take a descriptor from
// another process of the sandbox.
func trace(label string, pid int) {
	err := unix.PtraceAttach(pid)
	if err == nil {
		var st unix.WaitStatus
		_, _ = unix.Wait4(pid, &st, unix.WALL, nil)
		_ = unix.PtraceDetach(pid)
	}
	verdict("PTRACE-"+label, err)

	addr, err := readableAddr(pid)
	if err == nil {
		buf := make([]byte, 16)
		_, err = unix.ProcessVMReadv(pid, []unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}},
			[]unix.RemoteIovec{{Base: addr, Len: len(buf)}}, 0)
	}
	verdict("VMREAD-"+label, err)

	pidfd, err := unix.PidfdOpen(pid, 0)
	if err == nil {
		var fd int
		fd, err = unix.PidfdGetfd(pidfd, 0, 0)
		closeOK(fd, err)
		_ = unix.Close(pidfd)
	}
	verdict("PIDFD-GETFD-"+label, err)
}

// readableAddr is the start of pid's first readable mapping.
func readableAddr(pid int) (uintptr, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 || !strings.HasPrefix(fs[1], "r") {
			continue
		}
		start, _, _ := strings.Cut(fs[0], "-")
		a, err := strconv.ParseUint(start, 16, 64)
		return uintptr(a), err
	}
	return 0, errors.New("no readable mapping listed")
}

// bpfMap creates the simplest BPF object, an array map.
func bpfMap() {
	attr := struct{ mapType, keySize, valueSize, maxEntries uint32 }{2, 4, 4, 1} // BPF_MAP_TYPE_ARRAY
	fd, _, e := unix.Syscall(unix.SYS_BPF, 0 /* BPF_MAP_CREATE */, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	closeOK(int(fd), errnoErr(e))
	verdict("BPF", errnoErr(e))
}

// perfEvent opens a software counter on itself, user space only: what
// kernel.perf_event_paranoid=2 still allows anyone.
func perfEvent() {
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_CPU_CLOCK,
		Bits:   unix.PerfBitDisabled | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv,
	}
	attr.Size = uint32(unsafe.Sizeof(attr))
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	closeOK(fd, err)
	verdict("PERF-EVENT-OPEN", err)
}
