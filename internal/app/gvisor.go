package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/sandbox/gvisor"
)

// gvisorBackend is runsc under the host's data dir, checked with a
// trivial sandbox: a host that cannot run it learns so at start.
func gvisorBackend(ctx context.Context, cfg config.Config, inst instance, uid, gid int, log *slog.Logger) (*gvisor.Backend, error) {
	if os.Geteuid() != 0 {
		return nil, &setupError{errors.New("gVisor's runsc needs the host to run as root"), "run clawpen as root (it runs sandboxes as " + cfg.SandboxUser + ")"}
	}
	if uid <= 0 {
		return nil, fmt.Errorf("gVisor needs the sandbox user %s", cfg.SandboxUser)
	}
	bin, err := AgentBin(cfg)
	if err != nil {
		return nil, &setupError{err, "run `make build` (builds bin/clawpen and bin/clawpen-agent)"}
	}
	g, err := gvisor.New(ctx, gvisor.Config{AgentBin: bin, StateDir: inst.gvisor, PinDir: inst.gvisor + "/pins",
		DiskUID: uid, DiskGID: gid, Prefix: inst.cgroup + "-gvisor", Logger: log})
	if err != nil {
		return nil, &setupError{err, "install gVisor (apt-get install runsc)"}
	}
	if err := g.Check(ctx); err != nil {
		_ = g.Close()
		return nil, &setupError{err, "check `runsc --network=none do echo hi` as root; runsc needs ptrace (or KVM) and cgroups"}
	}
	return g, nil
}

// routed is the host's backend with gVisor beside it for the groups whose
// profile asks for it ("runtime": "gvisor"). Without a working gVisor such a
// run is refused with the reason (fail closed), never run on the host's
// backend.
type routed struct {
	runner.Sandbox
	make func(context.Context) (*gvisor.Backend, error)

	mu        sync.Mutex
	tried     bool
	gvisor    *gvisor.Backend // nil: gVisor does not work here (gvisorErr)
	gvisorErr error
}

func (r *routed) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	if spec.Runtime != domain.RuntimeGVisor {
		return r.Sandbox.Run(ctx, spec)
	}
	g, err := r.gVisor(ctx)
	if err != nil {
		return sandbox.Result{}, fmt.Errorf("%w: the profile asks for runtime gvisor, which does not work on this host: %w", runner.ErrProfile, err)
	}
	return g.Run(ctx, spec)
}

// gVisor makes the gVisor backend on first use; a failure is kept (the
// host says why at every such run until it restarts).
func (r *routed) gVisor(ctx context.Context) (*gvisor.Backend, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.tried {
		r.tried = true
		r.gvisor, r.gvisorErr = r.make(context.WithoutCancel(ctx))
	}
	return r.gvisor, r.gvisorErr
}

func (r *routed) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gvisor != nil {
		_ = r.gvisor.Close()
	}
}

// Fingerprint is the host backend's and gVisor's together: a rebuilt agent
// or runsc makes warm sandboxes stale.
func (r *routed) Fingerprint(ctx context.Context) (string, error) {
	var fp string
	if f, ok := r.Sandbox.(runner.Fingerprinter); ok {
		s, err := f.Fingerprint(ctx)
		if err != nil {
			return "", err
		}
		fp = s
	}
	r.mu.Lock()
	g := r.gvisor
	r.mu.Unlock()
	if g != nil {
		s, err := g.Fingerprint(ctx)
		if err != nil {
			return "", err
		}
		fp += s
	}
	return fp, nil
}

// hostBackend is the backend the host picked, under a routed one.
func hostBackend(sb runner.Sandbox) runner.Sandbox {
	if r, ok := sb.(*routed); ok {
		return r.Sandbox
	}
	return sb
}

// gvisorFinding tries runsc as serve would (a trial sandbox included). It
// fails doctor only when gVisor is the host's backend; otherwise a broken
// gVisor is a warning: the groups whose profile asks for it will not run.
func gvisorFinding(ctx context.Context, cfg config.Config, inst instance, uid, gid int, userErr error) (Finding, bool) {
	f := Finding{Name: "gvisor", Verdict: Warn}
	if cfg.Sandbox == "gvisor" {
		f.Verdict = Fail
	}
	if userErr != nil {
		f.Detail, f.Fix = "not tried: no usable sandbox user to write as", "fix the user finding above"
		return f, false
	}
	g, err := gvisorBackend(ctx, cfg, inst, uid, gid, slog.New(slog.DiscardHandler))
	if err != nil {
		f.Detail, f.Fix = err.Error()+"; profiles with \"runtime\": \"gvisor\" will not run", fixOf(err)
		return f, false
	}
	defer g.Close()
	v, err := g.Version(ctx)
	if err != nil {
		f.Detail = err.Error()
		return f, false
	}
	f.Verdict, f.Detail = OK, v+" (platform ptrace); a trial sandbox ran as uid 1000 with no network"
	return f, true
}
