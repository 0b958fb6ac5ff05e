package ops

// Host bridge tools (DESIGN.md, "Host bridge tools"): the host finds the
// tool in the owner's definitions as they read now, decides with the
// group's profile as the host's records give it (never what the job or the
// request claims), checks the arguments, runs the command and writes the
// call to the audit log with a digest of its arguments, not them.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/clawpen/clawpen/internal/approval"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/tools"
)

// HostTool is the operation of POST /ipc/host_tool.
const HostTool Op = "host_tool"

// MaxToolCallsPerRun bounds the bridge tool calls one run has going at
// once; more are refused until one ends.
const MaxToolCallsPerRun = 4

type hostToolReq struct {
	Name string         `json:"name"`
	Args jsontext.Value `json:"args"` // kept as sent: numbers keep their digits
}

// profileOf is the sandbox profile group c runs under now; main needs none.
func (s *Service) profileOf(ctx context.Context, c domain.Caller) (domain.Profile, error) {
	if c.Owner || c.IsMain {
		return domain.Profile{Name: domain.DefaultProfile}, nil
	}
	g, ok, err := s.cfg.Store.GroupByFolder(ctx, c.Group)
	if err != nil {
		return domain.Profile{}, err
	}
	if !ok {
		return domain.Profile{}, denied{reason: fmt.Sprintf("group %q is not registered", c.Group)}
	}
	p, err := s.Profiles().Resolve(g.ProfileName())
	if err != nil {
		return domain.Profile{}, denied{reason: fmt.Sprintf("profile %q of group %q cannot be used: %v", g.ProfileName(), c.Group, err)}
	}
	return p, nil
}

// ToolsFor lists the bridge tools c may call under prof, for its job: what
// the agent offers the model. Every call is checked again (HostTool).
func (s *Service) ToolsFor(c domain.Caller, prof domain.Profile) []domain.JobTool {
	if s.cfg.Tools == nil {
		return nil
	}
	var out []domain.JobTool
	for _, t := range s.cfg.Tools.Load().Tools {
		if tools.Authorize(c, t, prof).Allow {
			out = append(out, domain.JobTool{Name: t.Name, Description: t.Description, Guidance: t.Guidance, InputSchema: jsontext.Value(t.Schema)})
		}
	}
	return out
}

// HostTool runs bridge tool name with args (a JSON object) for c. A tool
// c may not call and one that does not exist get the same refusal; the
// audit log tells them apart.
func (s *Service) HostTool(ctx context.Context, c domain.Caller, name string, args []byte) (tools.Result, error) {
	// The call's row is written even when the agent has gone (its request
	// cancelled, the run ended) while the command ran.
	auditCtx := context.WithoutCancel(ctx)
	return call(auditCtx, s, c, HostTool, func(st *runState) (tools.Result, error) {
		var tool *tools.Tool
		if s.cfg.Tools != nil {
			tool = s.cfg.Tools.Load().Lookup(name)
		}
		prof, err := s.profileOf(ctx, c)
		if err != nil {
			return tools.Result{}, err
		}
		if d := tools.Authorize(c, tool, prof); !d.Allow {
			return tools.Result{}, denied{reason: fmt.Sprintf("no bridge tool %q that this group may call", name), detail: fmt.Sprintf("tool %q: %s", name, d.Reason)}
		}
		if !st.owner {
			s.mu.Lock()
			busy := st.toolCalls >= MaxToolCallsPerRun
			if !busy {
				st.toolCalls++
			}
			s.mu.Unlock()
			if busy {
				return tools.Result{}, denied{reason: fmt.Sprintf("this run already has %d bridge tool calls running, the most at once; wait for one to end", MaxToolCallsPerRun)}
			}
			defer func() {
				s.mu.Lock()
				st.toolCalls--
				s.mu.Unlock()
			}()
		}
		tc, err := tool.Prepare(args)
		if err != nil {
			return tools.Result{}, bad("%s: %v", name, err)
		}
		if tool.NeedsApproval(c) {
			if err := s.approve(ctx, c, name, tc); err != nil {
				return tools.Result{}, err
			}
		}
		started := s.cfg.Now()
		res, err := tool.Run(ctx, tc, s.cfg.ToolEnv)
		outcome := fmt.Sprintf("exit %d", res.ExitCode)
		switch {
		case err != nil:
			outcome = "not started: " + err.Error()
		case res.TimedOut:
			outcome += fmt.Sprintf(", killed at its timeout of %s", tool.Timeout)
		}
		if res.Truncated {
			outcome += ", output cut"
		}
		if err != nil || res.ExitCode != 0 || res.TimedOut {
			s.cfg.Tools.Record(name, started, outcome)
		}
		s.auditCall(auditCtx, st, fmt.Sprintf("tool %s args sha256:%s %s in %s", name, tc.Digest, outcome, res.Duration.Round(time.Millisecond)))
		if !st.owner {
			// The tool's env may have changed since the run began.
			s.cfg.Guard.Refresh()
			res.Stdout = s.redact(auditCtx, c.Group, "the stdout of bridge tool "+name, res.Stdout)
			res.Stderr = s.redact(auditCtx, c.Group, "the stderr of bridge tool "+name, res.Stderr)
		}
		return res, err
	})
}

// approve waits for the owner's press on a call of a tool marked for
// approval: the command as it would run is shown, and nothing runs without
// "Allow once".
func (s *Service) approve(ctx context.Context, c domain.Caller, name string, tc tools.Call) error {
	if s.cfg.Approvals == nil {
		return denied{reason: fmt.Sprintf("tool %q waits for the owner's approval, and this host cannot ask", name)}
	}
	return asDenial(s.cfg.Approvals.Tool(ctx, c.Run, c.Group, name, tc.Argv, tc.Digest))
}

// asDenial is an approval's refusal as the socket answers it; any other
// failure to ask refuses too (fail closed), its cause logged by the broker.
func asDenial(err error) error {
	var d *approval.Denial
	switch {
	case err == nil:
		return nil
	case errors.As(err, &d):
		return denied{reason: d.Reason}
	}
	return denied{reason: "the owner could not be asked", detail: "the owner could not be asked: " + err.Error()}
}

// AskEgress asks the owner (unless the owner allowed it for the group
// before) whether run c may connect to host:port, which its egress list
// does not hold: the egress proxy's question under egress_ask. It answers
// who allowed it, or a refusal whose text follows "denied: " (the proxy
// writes it and audits it).
func (s *Service) AskEgress(ctx context.Context, c domain.Caller, host string, port int) (string, error) {
	if s.cfg.Approvals == nil {
		return "", errors.New("this host cannot ask the owner")
	}
	how, err := s.cfg.Approvals.Egress(ctx, c.Run, c.Group, host, port)
	var d *approval.Denial
	if err != nil && !errors.As(err, &d) {
		s.cfg.Logger.Error("ask the owner about egress", "group", c.Group, "err", err)
		return "", errors.New("the owner could not be asked")
	}
	return how, err
}

// auditCall writes the row of a bridge call that ran. Unlike other
// allowed calls these are never only counted: every call is a process on
// the host, which bounds them better than the audit budget would.
func (s *Service) auditCall(ctx context.Context, st *runState, reason string) {
	e := domain.AuditEntry{Time: s.cfg.Now(), Group: st.group, Operation: "ipc." + string(HostTool), Decision: "allow", Reason: reason}
	if st.owner {
		e.Operation, e.Reason = string(HostTool), reason+" by the owner"
	}
	if err := s.cfg.Store.Audit(ctx, e); err != nil {
		s.cfg.Logger.Error("write audit log", "err", err)
	}
}

// ToolView is a bridge tool as the owner sees it: who may call it now
// (the registered groups that both its groups and their profiles admit)
// and its last failure since the host started.
type ToolView struct {
	Tool    *tools.Tool
	Callers []string
	LastErr *tools.LastError
}

// Tools lists the owner's bridge tools and the definitions that were
// skipped, with why.
func (s *Service) Tools(ctx context.Context) ([]ToolView, []tools.Problem, error) {
	if s.cfg.Tools == nil {
		return nil, nil, nil
	}
	set := s.cfg.Tools.Load()
	groups, err := s.cfg.Store.ListGroups(ctx)
	if err != nil {
		return nil, nil, err
	}
	profiles := s.Profiles()
	views := make([]ToolView, 0, len(set.Tools))
	for _, t := range set.Tools {
		v := ToolView{Tool: t}
		for _, g := range groups {
			prof, err := profiles.Resolve(g.ProfileName())
			if err != nil && !g.IsMain() {
				continue
			}
			if tools.Authorize(g.Caller(""), t, prof).Allow {
				v.Callers = append(v.Callers, g.Folder)
			}
		}
		if le, ok := s.cfg.Tools.LastError(t.Name); ok {
			v.LastErr = &le
		}
		views = append(views, v)
	}
	return views, set.Problems, nil
}

// redact is text with the host's secrets replaced (leakguard); a find is
// audited as going to where.
func (s *Service) redact(ctx context.Context, group, where, text string) string {
	out, f := s.cfg.Guard.Redact(text)
	if f.Found() {
		reason := fmt.Sprintf("redacted %s from %s", f, where)
		s.cfg.Logger.Warn("leak guard", "group", group, "reason", reason)
		if err := s.cfg.Store.Audit(context.WithoutCancel(ctx), domain.AuditEntry{Time: s.cfg.Now(), Group: group, Operation: "leakguard", Decision: "deny", Reason: reason}); err != nil {
			s.cfg.Logger.Error("write audit log", "err", err)
		}
	}
	return out
}
