package runner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// view is everything a group's sandbox is made from, as it is now: a
// sandbox made for one view is never used for another (DESIGN.md, "A
// sandbox serves exactly one invocation").
type view struct {
	group  domain.Group
	prof   domain.Profile
	limits sandbox.Limits
	extra  []sandbox.Mount
	key    string // digest of all the above and of the backend's agent
}

// Fingerprinter is a backend whose agent can change under a running host
// (a rebuilt binary or image): its fingerprint is part of every view.
type Fingerprinter interface {
	Fingerprint(ctx context.Context) (string, error)
}

// viewOf resolves g's view now. audit records refused extra mounts (a run
// does; a look for the warm pool does not, or every look would).
func (r *Runner) viewOf(ctx context.Context, g domain.Group, audit bool) (view, error) {
	prof, err := r.profile(g)
	if err != nil {
		return view{}, fmt.Errorf("run for %q: %w", g.Folder, err)
	}
	v := view{group: g, prof: prof, limits: profileLimits(r.cfg.Limits.WithDefaults(), prof)}
	if audit {
		v.extra = r.extraMounts(ctx, g)
	} else if r.cfg.Mounts != nil {
		v.extra, _ = r.cfg.Mounts.Resolve(g)
	}
	if r.warm == nil {
		return v, nil // no pool: nothing to compare a view with (Docker's fingerprint is an engine call)
	}
	var agent string
	if f, ok := r.sandbox.(Fingerprinter); ok {
		if agent, err = f.Fingerprint(ctx); err != nil {
			return view{}, fmt.Errorf("run for %q: %w", g.Folder, err)
		}
	}
	b, err := json.Marshal(struct {
		Folder string
		ChatID int64
		Main   bool
		Prof   domain.Profile
		Limits sandbox.Limits
		Extra  []sandbox.Mount
		Agent  string
	}{g.Folder, g.ChatID, g.IsMain(), prof, v.limits, v.extra, agent})
	if err != nil {
		return view{}, fmt.Errorf("view of %q: %w", g.Folder, err)
	}
	sum := sha256.Sum256(b)
	v.key = hex.EncodeToString(sum[:])
	return v, nil
}

// sandboxRun is one sandbox started for a group: its host socket is open
// and its sandbox is being made, or waits for its job, or runs it. It
// serves exactly one invocation.
type sandboxRun struct {
	inv  string
	view view
	spec sandbox.Spec
	srv  *hostsock.Server

	// ctx is the sandbox's: stop cancels it with a cause (disk quota, the
	// request's end, a discarded warm sandbox) and the backend kills it.
	ctx   context.Context
	stop  context.CancelCauseFunc
	jobs  chan []byte   // the job, once (buffered)
	ready chan struct{} // closed when the sandbox asks for its job

	out   *lockedBuffer
	early *earlyResult

	done chan struct{} // closed when the sandbox is gone; res and err are set
	res  sandbox.Result
	err  error

	closeOnce sync.Once
	closeFn   func()
}

// launch opens a host socket for g and starts its sandbox in view v. With
// cmd set the sandbox runs it connected to stdio (Exec); otherwise it runs
// the agent, which waits for the job given to give(). base bounds the
// sandbox's life.
func (r *Runner) launch(base context.Context, v view, cmd []string, stdio *sandbox.Stdio) (*sandboxRun, error) {
	g := v.group
	folder := g.Folder
	inv, err := invocationID()
	if err != nil {
		return nil, err
	}
	sock := socketPath(r.cfg.DataDir, inv)
	hcfg := r.cfg.Upstreams
	if r.cfg.Ops != nil {
		caller := g.Caller(inv)
		hcfg.IPC = r.cfg.Ops.Handle
		hcfg.MCP = r.cfg.Ops.MCP(caller)
		hcfg.AskEgress = func(ctx context.Context, host string, port int) (string, error) {
			return r.cfg.Ops.AskEgress(ctx, caller, host, port)
		}
	}
	hcfg.Audit = r.cfg.Audit
	hcfg.Profile = v.prof
	hcfg.Usage, hcfg.Now, hcfg.TZ = r.cfg.Usage, r.cfg.Now, r.cfg.TZ
	hcfg.Logger = r.cfg.Logger
	hcfg.Guard = r.cfg.Guard
	// The proxy sends the group's model, whatever the agent asks for.
	hcfg.Model = r.model(v.prof)
	srv, err := hostsock.Listen(sock, r.cfg.RunAsUID, r.cfg.RunAsGID, g.Caller(inv), hcfg)
	if err != nil {
		return nil, fmt.Errorf("open host socket for %q: %w", folder, err)
	}
	bundle, err := r.caBundle(srv)
	if err != nil {
		_ = srv.Close()
		_ = os.RemoveAll(filepath.Dir(sock))
		return nil, fmt.Errorf("run for %q: %w", folder, err)
	}
	ctx, stop := context.WithCancelCause(base)
	sr := &sandboxRun{
		inv: inv, view: v, srv: srv, ctx: ctx, stop: stop,
		jobs: make(chan []byte, 1), ready: make(chan struct{}), out: &lockedBuffer{}, early: &earlyResult{},
		done: make(chan struct{}),
	}
	sr.closeFn = func() {
		stop(nil)
		_ = srv.Close()
		_ = os.RemoveAll(filepath.Dir(sock))
		if r.cfg.Ops != nil {
			r.cfg.Ops.EndRun(inv)
		}
	}
	sr.spec = sandbox.Spec{
		InvocationID: inv, Group: folder, IsMain: g.IsMain(),
		GroupDir: filepath.Join(r.cfg.GroupsDir, folder), GlobalDir: filepath.Join(r.cfg.GroupsDir, domain.GlobalFolder),
		GlobalWritable: g.IsMain(), SessionDir: SessionDir(r.cfg.DataDir, folder), SocketPath: srv.Path(),
		Extra: v.extra, Env: caEnv(egressEnv(r.cfg.Env, v.prof), bundle), CABundle: bundle, Stdout: io.MultiWriter(sr.out, sr.early),
		Limits: v.limits, Command: cmd, Stdio: stdio, Runtime: v.prof.Runtime,
	}
	if cmd == nil {
		sr.spec.Job = func(ctx context.Context) ([]byte, error) {
			// Asked once the sandbox is up with its limits set.
			close(sr.ready)
			select {
			case j := <-sr.jobs:
				return j, nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
	}
	go func() {
		sr.res, sr.err = r.sandbox.Run(ctx, sr.spec)
		close(sr.done)
	}()
	return sr, nil
}

// give hands the sandbox its job; the progress and answer of its output go
// to iv and progress from now on.
func (sr *sandboxRun) give(job []byte, iv *Invocation, progress func(string)) {
	sr.early.attach(iv, progress)
	sr.jobs <- job
}

// close releases the host socket once the sandbox is gone (or will be).
func (sr *sandboxRun) close() { sr.closeOnce.Do(sr.closeFn) }

// lockedBuffer is the agent's output: written by the backend's copy, read
// once the sandbox is gone.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) reader() io.Reader {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.NewReader(b.buf.Bytes())
}
