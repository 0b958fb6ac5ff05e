package bwrap

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// keyringChildEnv makes the test binary, run again, report its session
// keyring and whether it finds the key the test planted.
const keyringChildEnv = "CLAWPEN_BWRAP_TEST_KEYRING_CHILD"

const plantedKey = "clawpen-bwrap-test-planted"

func TestMain(m *testing.M) {
	if os.Getenv(keyringChildEnv) == "1" {
		id, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
		_, serr := unix.KeyctlSearch(unix.KEY_SPEC_SESSION_KEYRING, "user", plantedKey, 0)
		fmt.Printf("%d %v %v\n", id, err, serr)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestEachStartGetsFreshKeyring plants a key in the session keyring of the
// thread that starts processes, as a host holding a key would, and starts
// two children the way Run starts bwrap: neither finds the key, and each has
// a keyring of its own.
func TestEachStartGetsFreshKeyring(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	b := &Backend{log: slog.New(slog.DiscardHandler)}
	type report struct{ id, line string }
	done := make(chan []report, 1)
	errs := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, carrying the planted key, ends with
		// this goroutine.
		runtime.LockOSThread()
		host, err := joinAnonymousKeyring()
		if err == nil {
			_, err = unix.AddKey("user", plantedKey, []byte("secret"), unix.KEY_SPEC_SESSION_KEYRING)
		}
		if err != nil {
			errs <- fmt.Errorf("plant the host's key: %w", err)
			return
		}
		// The control: a child started plainly finds it.
		var reps []report
		for _, fresh := range []bool{false, true, true} {
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), keyringChildEnv+"=1")
			var out strings.Builder
			cmd.Stdout = &out
			if fresh {
				err = b.startInFreshKeyring(cmd)
			} else {
				err = cmd.Start()
			}
			if err == nil {
				err = cmd.Wait()
			}
			if err != nil {
				errs <- err
				return
			}
			line := strings.TrimSpace(out.String())
			reps = append(reps, report{id: strings.Fields(line)[0], line: line})
		}
		reps = append(reps, report{id: fmt.Sprint(host)})
		done <- reps
	}()
	var reps []report
	select {
	case err := <-errs:
		require.NoError(t, err)
	case reps = <-done:
	}
	plain, first, second, host := reps[0], reps[1], reps[2], reps[3]
	require.Equal(t, host.id+" <nil> <nil>", plain.line, "the control child should share the host's keyring and find the key")
	for _, r := range []report{first, second} {
		assert.NotEqual(t, host.id, r.id, "a sandbox got the host's keyring")
		assert.Contains(t, r.line, unix.ENOKEY.Error(), "a sandbox found the host's key: %s", r.line)
	}
	assert.NotEqual(t, first.id, second.id, "two sandboxes share a keyring")
}

func TestCheckKeyring(t *testing.T) {
	b := &Backend{log: slog.New(slog.DiscardHandler)}
	err := b.CheckKeyring()
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS) {
		t.Skipf("this host may not use keyctl: %v", err)
	}
	require.NoError(t, err)
}
