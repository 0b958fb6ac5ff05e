package mounts

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// Decision is the verdict on one request of a group, for `clawpen mounts
// check` and the audit log.
type Decision struct {
	Request domain.MountRequest
	Mount   sandbox.Mount // zero when refused
	Err     error         // a *Refusal when refused
	Note    string        // why a requested read-write mount is read-only
}

// Check validates a group's requests in order. A request reusing an earlier
// request's containerPath is refused: two mounts cannot share a name.
func Check(al Allowlist, reqs []domain.MountRequest, isMain bool) []Decision {
	ds := make([]Decision, 0, len(reqs))
	seen := map[string]bool{}
	for _, r := range reqs {
		d := Decision{Request: r}
		if seen[r.ContainerPath] {
			d.Err = refuse(RuleDuplicateName, r.HostPath, "containerPath %q is used by an earlier mount", r.ContainerPath)
		} else {
			d.Mount, d.Note, d.Err = validate(al, r, isMain)
		}
		seen[r.ContainerPath] = true
		ds = append(ds, d)
	}
	return ds
}

// FormatDecisions prints the decisions of one group as a table: container
// name, host path (resolved when allowed, as requested when refused),
// decision (allow ro / allow rw / REFUSED) and reason. Strings from the
// group's configuration are quoted when they hold anything unprintable.
func FormatDecisions(w io.Writer, folder string, ds []Decision) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "group %s\n", printable(folder))
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTAINER\tHOST PATH\tDECISION\tREASON")
	for _, d := range ds {
		host, decision, reason := printable(d.Request.HostPath), "REFUSED", ""
		var r *Refusal
		switch {
		case d.Err == nil:
			host = printable(d.Mount.HostPath)
			decision = "allow rw"
			if d.Mount.ReadOnly {
				decision = "allow ro"
			}
			reason = d.Note
		case errors.As(d.Err, &r):
			reason = r.Rule + ": " + r.Reason
		default:
			reason = d.Err.Error()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", printable(d.Request.ContainerPath), host, decision, printableReason(reason))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write decisions: %w", err)
	}
	// Allowed rows have no reason; drop the padding tabwriter leaves.
	lines := strings.SplitAfter(buf.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(strings.TrimSuffix(l, "\n"), " ") + strings.Repeat("\n", strings.Count(l, "\n"))
	}
	if _, err := io.WriteString(w, strings.Join(lines, "")); err != nil {
		return fmt.Errorf("write decisions: %w", err)
	}
	return nil
}

// printable quotes s when it is empty or holds a tab, newline, control or
// other unprintable character, so a hostile name cannot forge table rows.
func printable(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || r == '\t' {
			return strconv.Quote(s)
		}
	}
	return s
}

// printableReason keeps reasons (which embed %q-quoted names) on one line.
func printableReason(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) || r == '\t' {
			q := strconv.Quote(s)
			return q[1 : len(q)-1]
		}
	}
	return s
}
