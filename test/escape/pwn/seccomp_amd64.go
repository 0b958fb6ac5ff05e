package main

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// int80Child makes an i386 system call through int 0x80, which a 64-bit
// process may do when the kernel has IA32 emulation: the call is checked
// against seccomp as architecture i386, with i386 numbers. It runs in a forked
// child, because a filter may answer by killing the thread (Docker's does
// for an architecture its profile leaves out), which would hang a Go program.
// With domain set, the call must return a socket of that family to count as
// a success (see the assembly).
func int80Child(nr, a1, a2, a3, a4, a5, domain uint32) int32

// errNoSocket is a call to make a socket that returned success but no
// socket of the family asked for: it was served as another call.
var errNoSocket = errors.New("the call returned success but made no socket of that family")

// int80 runs int80Child and waits: nil when the call succeeded, else why not.
func int80(nr, a1, a2, a3, a4, a5 uint32) error { return int80Domain(nr, a1, a2, a3, a4, a5, 0) }

// int80Domain is int80 for a call that makes a socket of family domain.
func int80Domain(nr, a1, a2, a3, a4, a5, domain uint32) error {
	pid := int80Child(nr, a1, a2, a3, a4, a5, domain)
	if pid < 0 {
		return fmt.Errorf("fork: %w", unix.Errno(-pid))
	}
	var st unix.WaitStatus
	if _, err := unix.Wait4(int(pid), &st, 0, nil); err != nil {
		return fmt.Errorf("wait: %w", err)
	}
	switch {
	case st.Signaled():
		return fmt.Errorf("killed by %v", st.Signal())
	case st.ExitStatus() == 255:
		return errNoSocket
	case st.ExitStatus() != 0:
		return unix.Errno(st.ExitStatus())
	}
	return nil
}

// i386 system call numbers.
const (
	i386Getpid     = 20
	i386Clone      = 120
	i386Socketcall = 102
	i386Keyctl     = 288
)

// keySpecSession is KEY_SPEC_SESSION_KEYRING as an i386 register holds it.
const keySpecSession = uint32(0xfffffffd)

func init() { checks["int80"] = func(args []string) { int80Checks(arg(args, 0)) } }

// int80Checks tries, through the i386 ABI, what the native checks try: the
// session keyring and the host's key named desc in it, a vsock socket, a new
// user namespace.
func int80Checks(desc string) {
	// Pointers passed to an i386 call must fit in 32 bits.
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_32BIT)
	if err != nil {
		fmt.Println("INT80 mmap below 4 GiB:", err)
		return
	}
	addr := func(off int) uint32 { return uint32(uintptr(unsafe.Pointer(&mem[off]))) }
	fmt.Printf("int 0x80 getpid: %v\n", int80(i386Getpid, 0, 0, 0, 0, 0))

	verdict("INT80-KEYCTL", int80(i386Keyctl, unix.KEYCTL_GET_KEYRING_ID, keySpecSession, 0, 0, 0))
	copy(mem[0:], "user\x00")
	copy(mem[16:], desc+"\x00")
	err = int80(i386Keyctl, unix.KEYCTL_SEARCH, keySpecSession, addr(0), addr(16), 0)
	if errors.Is(err, unix.ENOKEY) {
		fmt.Println("INT80 keyctl search reached the kernel: no such key")
	}
	verdict("INT80-KEYSEARCH", err)

	// socketcall(SYS_SOCKET, {AF_VSOCK, SOCK_STREAM, 0})
	for i, v := range []uint32{unix.AF_VSOCK, unix.SOCK_STREAM, 0} {
		*(*uint32)(unsafe.Pointer(&mem[512+4*i])) = v
	}
	verdict("INT80-SOCKET-VSOCK", int80Domain(i386Socketcall, 1, addr(512), 0, 0, 0, unix.AF_VSOCK))

	// clone(CLONE_NEWUSER|SIGCHLD): the new process exits at once.
	verdict("INT80-CLONE-NEWUSER", int80(i386Clone, unix.CLONE_NEWUSER|uint32(unix.SIGCHLD), 0, 0, 0, 0))
}
