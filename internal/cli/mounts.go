package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"

	"github.com/clawpen/clawpen/internal/app"
	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/mounts"
	"github.com/clawpen/clawpen/internal/store"
)

// groupMount runs `clawpen groups mount add|remove|list`.
func groupMount(ctx context.Context, cfg config.Config, st *store.Store, args []string, stdout io.Writer) error {
	const usage = "usage: clawpen groups mount add <folder> <hostPath> <containerPath> [--rw] [--write <subpath>]... | remove <folder> <containerPath> | list <folder>"
	if len(args) < 2 {
		return errors.New(usage)
	}
	g, ok, err := st.GroupByFolder(ctx, args[1])
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no group has the folder %q", args[1])
	}
	switch args[0] {
	case "list":
		for _, m := range g.Mounts {
			mode := "ro"
			if !m.ReadOnly {
				mode = "rw"
			}
			fmt.Fprintf(stdout, "%s\t%s\t%s", m.ContainerPath, m.HostPath, mode)
			for _, w := range m.WritePaths {
				fmt.Fprintf(stdout, "\twrite:%s", w)
			}
			fmt.Fprintln(stdout)
		}
		return nil
	case "remove":
		if len(args) != 3 {
			return errors.New(usage)
		}
		n := len(g.Mounts)
		g.Mounts = slices.DeleteFunc(g.Mounts, func(m domain.MountRequest) bool { return m.ContainerPath == args[2] })
		if len(g.Mounts) == n {
			return fmt.Errorf("group %s has no mount named %q", g.Folder, args[2])
		}
		if err := st.PutGroup(ctx, g); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed mount %s from %s\n", args[2], g.Folder)
		return nil
	case "add":
		if len(args) < 4 {
			return errors.New(usage)
		}
		req := domain.MountRequest{HostPath: args[2], ContainerPath: args[3], ReadOnly: true}
		for i := 4; i < len(args); i++ {
			switch {
			case args[i] == "--rw":
				req.ReadOnly = false
			case args[i] == "--write" && i+1 < len(args):
				req.WritePaths = append(req.WritePaths, args[i+1])
				i++
			default:
				return fmt.Errorf("unknown option %q; %s", args[i], usage)
			}
		}
		// Checked now so a mistake is told at once; checked again before every run.
		policy := app.NewMountPolicy(cfg, slog.New(slog.DiscardHandler))
		al, err := policy.Current()
		if err != nil {
			return fmt.Errorf("mount refused: %w (see configs/mount-allowlist.example.json; CLAWPEN_MOUNT_ALLOWLIST=%s)", err, cfg.MountAllowlist)
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
			if _, err := app.WritePath(al, last.Mount, w, g.IsMain()); err != nil {
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
		fmt.Fprintf(stdout, "mount %s: %s at /workspace/extra/%s, %s", g.Folder, last.Mount.HostPath, req.ContainerPath, mode)
		if last.Note != "" {
			fmt.Fprintf(stdout, " (%s)", last.Note)
		}
		fmt.Fprintln(stdout)
		return nil
	default:
		return errors.New(usage)
	}
}

// mountsCheck runs `clawpen mounts check [folder]`: per requested mount, the
// decision and the reason, exactly as the next invocation would see them.
func mountsCheck(ctx context.Context, cfg config.Config, st *store.Store, args []string, stdout io.Writer) error {
	policy := app.NewMountPolicy(cfg, slog.New(slog.DiscardHandler))
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
				if hp, err := app.WritePath(al, d.Mount, w, g.IsMain()); err != nil {
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
