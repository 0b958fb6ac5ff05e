package bwrap

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// joinAnonymousKeyring makes the calling thread, which must be locked, join a
// new session keyring. The name is NULL: a named keyring, even "", is one any
// process of the same user may join too (unix.KeyctlJoinSessionKeyring
// always passes a name). Session keyrings are per thread
// (part of its credentials) and inherited by the children it starts.
func joinAnonymousKeyring() (int, error) {
	id, _, e := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(id), nil
}

// start starts bwrap inside cg, in a fresh keyring; the baseline's plainly.
func (b *Backend) start(cmd *exec.Cmd, cg *Cgroup) error {
	if b.baseline {
		return cmd.Start()
	}
	return cg.Start(cmd, b.startInFreshKeyring)
}

// startInFreshKeyring starts cmd from a thread that has just joined a new
// anonymous session keyring, so bwrap and the sandbox inherit a keyring no
// other process holds: not the host's (whose keys they could otherwise read,
// or plant keys in for the next sandbox), nor another sandbox's. The thread
// then joins another one, so nothing the host starts later on it shares the
// sandbox's.
//
// The thread is unlocked afterwards, never left to exit: bwrap's Pdeathsig
// fires when the thread that started it exits.
func (b *Backend) startInFreshKeyring(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if _, err := joinAnonymousKeyring(); err != nil {
		// A host in a container with Docker's seccomp profile may not call
		// keyctl; the sandbox's own filter refuses keyctl and /proc/keys is
		// hidden, so the inherited keyring stays out of its reach.
		b.keyringWarn.Do(func() {
			b.log.Warn("cannot give sandboxes a fresh session keyring (keyctl refused to the host); they inherit the host's, "+
				"which their seccomp filter keeps them from using", "err", err)
		})
		return cmd.Start()
	}
	err := cmd.Start()
	_, _ = joinAnonymousKeyring()
	return err
}

// CheckKeyring reports whether each sandbox gets a session keyring of its
// own: the host may join a new anonymous one, and it differs from the one
// the host itself holds.
func (b *Backend) CheckKeyring() error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		before, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
		if err != nil && !errors.Is(err, unix.ENOKEY) {
			done <- fmt.Errorf("read the host's session keyring: %w", err)
			return
		}
		fresh, err := joinAnonymousKeyring()
		switch {
		case err != nil:
			done <- fmt.Errorf("join a new session keyring: %w", err)
		case fresh == before:
			done <- fmt.Errorf("joining a new session keyring kept the host's (%d)", fresh)
		default:
			done <- nil
		}
	}()
	return <-done
}
