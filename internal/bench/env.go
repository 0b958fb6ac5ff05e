package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/app"
	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/sandbox/bwrap"
	"github.com/clawpen/clawpen/internal/store"
)

// Helpers shared by every section: scratch directories the sandbox user can
// use, the fake Telegram and model, and clawpen's bwrap backend.

// ownerID is the owner of every bench host; his private chat is the main group.
const ownerID = int64(42)

// memberID sends the group messages of registered groups.
const memberID = int64(7777)

// groupChat is the chat id of registered group i.
func groupChat(i int) int64 { return -1_000_000_000 - int64(i) }

// groupFolder is the folder of registered group i.
func groupFolder(i int) string { return fmt.Sprintf("g%05d", i) }

// sandboxUser is who sandboxes run as, by `clawpen serve`'s rule
// (app.SandboxUser): the dedicated sandbox user on a root host, the host's
// own user (-1) otherwise.
func sandboxUser(o Options) (uid, gid int, err error) {
	return app.SandboxUser(cmp.Or(o.SandboxUser, config.DefaultSandboxUser))
}

// scratch is a temporary directory tree for one measurement.
type scratch struct {
	Root     string
	UID, GID int // the sandbox user (-1: the host's own)
}

// newScratch makes a temporary root (mode 0755, so the sandbox user can
// traverse it) holding groups/ and data/ as a host's working directory would.
func newScratch(o Options, prefix string) (*scratch, error) {
	uid, gid, err := sandboxUser(o)
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, fmt.Errorf("scratch dir: %w", err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("scratch dir: %w", err)
	}
	s := &scratch{Root: root, UID: uid, GID: gid}
	if err := s.Dirs("groups", "groups/global", "data"); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close removes the tree.
func (s *scratch) Close() { _ = os.RemoveAll(s.Root) }

// Path joins elements under the root.
func (s *scratch) Path(elem ...string) string {
	return filepath.Join(append([]string{s.Root}, elem...)...)
}

// GroupsDir and DataDir are the host's groups/ and data/.
func (s *scratch) GroupsDir() string { return s.Path("groups") }
func (s *scratch) DataDir() string   { return s.Path("data") }

// Dirs creates directories under the root owned by the sandbox user, so that
// a sandbox may bind and write them.
func (s *scratch) Dirs(rel ...string) error {
	for _, d := range rel {
		p := s.Path(d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", p, err)
		}
		if s.UID >= 0 {
			if err := os.Chown(p, s.UID, s.GID); err != nil {
				return fmt.Errorf("chown %s: %w", p, err)
			}
		}
	}
	return nil
}

// GroupSpec is a sandbox.Spec for the group folder (its directories made
// here), with no socket and no job: callers set Stdin, Stdout and the rest.
func (s *scratch) GroupSpec(folder string, isMain bool) (sandbox.Spec, error) {
	if err := s.Dirs("groups/"+folder, "data/sessions/"+folder); err != nil {
		return sandbox.Spec{}, err
	}
	return sandbox.Spec{
		InvocationID: "bench", Group: folder, IsMain: isMain,
		GroupDir: s.Path("groups", folder), GlobalDir: s.Path("groups", "global"), GlobalWritable: isMain,
		SessionDir: s.Path("data", "sessions", folder),
		Env:        map[string]string{"LANG": "C.UTF-8"}, Limits: sandbox.DefaultLimits,
	}, nil
}

// newBwrap is clawpen's bwrap backend for the agent binary, run as the
// scratch's sandbox user, each sandbox in its own cgroup as under `clawpen
// serve` (the caller closes it). command, when given, replaces the agent;
// pinDir (root only) pins every bind source first as a root host does.
func newBwrap(o Options, s *scratch, pinDir string, baseline bool, command ...string) (*bwrap.Backend, error) {
	cfg := bwrap.Config{AgentBin: o.AgentBin, RunAsUID: s.UID, RunAsGID: s.GID, PinDir: pinDir, Command: command}
	newBackend := bwrap.New
	if baseline {
		newBackend = bwrap.NewBaseline
	}
	be, err := newBackend(cfg)
	if err != nil {
		return nil, fmt.Errorf("bwrap backend: %w", err)
	}
	return be, nil
}

// HostBin finds the clawpen binary the serve rows run: beside this program
// (bin/clawpen beside bin/clawpen-bench, as `make bench` builds them), then
// $PATH. The path is resolved, so a footprint row names the file it measured.
func HostBin() (string, error) {
	if exe, err := os.Executable(); err == nil {
		if p, err := filepath.EvalSymlinks(filepath.Join(filepath.Dir(exe), "clawpen")); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("clawpen")
	if err == nil {
		p, err = filepath.Abs(p)
	}
	if err == nil {
		p, err = filepath.EvalSymlinks(p)
	}
	if err != nil {
		return "", errors.New("clawpen not found beside clawpen-bench nor in $PATH: run `make bench` (builds bin/clawpen and bin/clawpen-bench)")
	}
	return p, nil
}

// fakes are the fake Telegram and fake model on loopback.
type fakes struct {
	TG  *faketg.Server
	LLM *fakellm.Server
}

// startFakes starts both fakes; opts configure the fake Telegram.
func startFakes(opts ...faketg.Option) *fakes {
	return &fakes{TG: faketg.New(opts...), LLM: fakellm.New()}
}

// Close stops both.
func (f *fakes) Close() {
	f.TG.Close()
	f.LLM.Close()
}

// registerGroups puts n groups (folders g00000 …, chats groupChat(i)) into
// st, as `clawpen groups add` would.
func registerGroups(ctx context.Context, st *store.Store, n int) error {
	for i := range n {
		chat := groupChat(i)
		if err := st.UpsertChat(ctx, domain.Chat{ID: chat, Title: fmt.Sprint("chat ", i), Type: "supergroup"}); err != nil {
			return fmt.Errorf("register group %d: %w", i, err)
		}
		if err := st.PutGroup(ctx, domain.Group{ChatID: chat, Name: fmt.Sprint("group ", i), Folder: groupFolder(i)}); err != nil {
			return fmt.Errorf("register group %d: %w", i, err)
		}
	}
	return nil
}

// becomeSubreaper makes this process the reaper of orphaned descendants:
// bwrap leaves its PID-namespace init to be reparented, and without this it
// would go to PID 1 (slow, or never, in a container) and pile up as zombies
// meanwhile.
func becomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	return nil
}

// reapOrphans collects exited orphans reparented to this process. Call it
// only while nothing else of this process waits for children (the sections
// run one at a time), or it could steal another waiter's child.
func reapOrphans() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
