package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/clawpen/clawpen/internal/app"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/mounts"
)

func mountCommand() *command {
	return &command{name: "mount", summary: "extra host folders of a group", subs: []*command{
		{name: "add", args: "<folder> <hostPath> <containerPath>", min: 3, max: 3,
			summary: "give a group a host folder at /workspace/extra/<containerPath>",
			detail: "hostPath must lie under a root of the mount allowlist (CLAWPEN_MOUNT_ALLOWLIST); the mount is\n" +
				"read-only unless --rw and the allowlist allow writing. Checked now and again before every run.",
			flags: func(fs *flag.FlagSet) action {
				rw := fs.Bool("rw", false, "mount read-write (where the allowlist allows it)")
				var write stringList
				fs.Var(&write, "write", "a `subpath` of a read-only mount that is writable; may be repeated")
				return func(ctx context.Context, s *session, args []string) error {
					return mountAdd(ctx, s, args, *rw, write)
				}
			}},
		{name: "remove", args: "<folder> <containerPath>", min: 2, max: 2,
			summary: "remove a group's extra mount", flags: noFlags(mountRemove)},
		{name: "list", args: "<folder>", min: 1, max: 1,
			summary: "a group's extra mounts: name, host path, mode", flags: noFlags(mountList)},
	}}
}

func mountsCommand() *command {
	return &command{name: "mounts", summary: "extra mounts", subs: []*command{
		{name: "check", args: "[folder]", max: 1,
			summary: "each requested mount: decision and reason",
			detail:  "Shows, per group (or for one folder), what the next run would mount and why, or why not.",
			flags:   noFlags(mountsCheck)},
	}}
}

func mountList(ctx context.Context, s *session, args []string) error {
	st, err := s.store(ctx)
	if err != nil {
		return err
	}
	g, err := groupByFolder(ctx, st, args[0])
	if err != nil {
		return err
	}
	for _, m := range g.Mounts {
		mode := "ro"
		if !m.ReadOnly {
			mode = "rw"
		}
		fmt.Fprintf(s.stdout, "%s\t%s\t%s", m.ContainerPath, m.HostPath, mode)
		for _, w := range m.WritePaths {
			fmt.Fprintf(s.stdout, "\twrite:%s", w)
		}
		fmt.Fprintln(s.stdout)
	}
	return nil
}

func mountRemove(ctx context.Context, s *session, args []string) error {
	st, err := s.store(ctx)
	if err != nil {
		return err
	}
	g, err := groupByFolder(ctx, st, args[0])
	if err != nil {
		return err
	}
	n := len(g.Mounts)
	g.Mounts = slices.DeleteFunc(g.Mounts, func(m domain.MountRequest) bool { return m.ContainerPath == args[1] })
	if len(g.Mounts) == n {
		return fmt.Errorf("group %s has no mount named %q", g.Folder, args[1])
	}
	if err := st.PutGroup(ctx, g); err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "removed mount %s from %s\n", args[1], g.Folder)
	return nil
}

func mountAdd(ctx context.Context, s *session, args []string, rw bool, writePaths []string) error {
	st, err := s.store(ctx)
	if err != nil {
		return err
	}
	g, err := groupByFolder(ctx, st, args[0])
	if err != nil {
		return err
	}
	req := domain.MountRequest{HostPath: args[1], ContainerPath: args[2], ReadOnly: !rw, WritePaths: writePaths}
	// Checked now so a mistake is told at once; checked again before every run.
	policy := app.MountPolicy(s.cfg, slog.New(slog.DiscardHandler))
	al, err := policy.Current()
	if err != nil {
		return fmt.Errorf("mount refused: %w (see configs/mount-allowlist.example.json; CLAWPEN_MOUNT_ALLOWLIST=%s)", err, s.cfg.MountAllowlist)
	}
	others := slices.DeleteFunc(slices.Clone(g.Mounts), func(m domain.MountRequest) bool { return m.ContainerPath == req.ContainerPath })
	d := mounts.Check(al, append(others, req), g.IsMain())
	last := d[len(d)-1]
	if last.Err != nil {
		_ = st.Audit(ctx, domain.AuditEntry{Group: g.Folder, Operation: "cli.mount_add", Decision: "deny", Reason: last.Err.Error()})
		return fmt.Errorf("mount refused: %w", last.Err)
	}
	for _, w := range req.WritePaths {
		if !last.Mount.ReadOnly {
			return fmt.Errorf("write path %q: the mount is already read-write", w)
		}
		if _, err := mounts.WritePath(al, last.Mount, w, g.IsMain()); err != nil {
			_ = st.Audit(ctx, domain.AuditEntry{Group: g.Folder, Operation: "cli.mount_add", Decision: "deny", Reason: err.Error()})
			return fmt.Errorf("write path refused: %w", err)
		}
	}
	g.Mounts = append(others, req)
	if err := st.PutGroup(ctx, g); err != nil {
		return err
	}
	mode := "read-only"
	if !last.Mount.ReadOnly {
		mode = "read-write"
	}
	fmt.Fprintf(s.stdout, "mount %s: %s at /workspace/extra/%s, %s", g.Folder, last.Mount.HostPath, req.ContainerPath, mode)
	if last.Note != "" {
		fmt.Fprintf(s.stdout, " (%s)", last.Note)
	}
	fmt.Fprintln(s.stdout)
	return nil
}

// mountsCheck runs `clawpen mounts check [folder]`: per requested mount, the
// decision and the reason, exactly as the next invocation would see them.
func mountsCheck(ctx context.Context, s *session, args []string) error {
	st, err := s.store(ctx)
	if err != nil {
		return err
	}
	stdout := s.stdout
	policy := app.MountPolicy(s.cfg, slog.New(slog.DiscardHandler))
	fmt.Fprintln(stdout, policy.Status())
	al, alErr := policy.Current()
	groups, err := st.ListGroups(ctx)
	if err != nil {
		return err
	}
	found := false
	for _, g := range groups {
		if len(args) > 0 && g.Folder != args[0] {
			continue
		}
		found = true
		if len(g.Mounts) == 0 {
			fmt.Fprintf(stdout, "\ngroup %s: no extra mounts\n", g.Folder)
			continue
		}
		fmt.Fprintln(stdout)
		if alErr != nil {
			fmt.Fprintf(stdout, "group %s: every mount refused: %v\n", g.Folder, alErr)
			continue
		}
		ds := mounts.Check(al, g.Mounts, g.IsMain())
		if err := mounts.FormatDecisions(stdout, g.Folder, ds); err != nil {
			return err
		}
		for _, d := range ds {
			if d.Err != nil || !d.Mount.ReadOnly {
				continue
			}
			for _, w := range d.Request.WritePaths {
				if hp, err := mounts.WritePath(al, d.Mount, w, g.IsMain()); err != nil {
					fmt.Fprintf(stdout, "  write %s/%s: REFUSED %v\n", d.Request.ContainerPath, w, err)
				} else {
					fmt.Fprintf(stdout, "  write %s/%s: allow rw (%s)\n", d.Request.ContainerPath, w, filepath.Clean(hp))
				}
			}
		}
	}
	if len(args) > 0 && !found {
		return fmt.Errorf("no group has the folder %q", args[0])
	}
	return nil
}

// stringList is a flag that may be given more than once.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

var _ flag.Value = (*stringList)(nil)
