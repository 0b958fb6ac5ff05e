package sandbox

import "github.com/clawpen/clawpen/internal/domain"

// Bind is one host path of the workspace view and where the sandbox sees
// it (DESIGN.md, "Sandbox contract"). A mask has no Source: the backend
// hides Dest with an empty read-only directory or /dev/null (MaskDir).
type Bind struct {
	Source   string // resolved host path; for a mask, the path it hides
	Dest     string
	ReadOnly bool
	Mask     bool
	// What names the bind in errors ("group folder", "extra mount x").
	What string
}

// WorkspaceBinds is the view of spec's host folders, parents before
// children: the group folder, the global folder, the session dir at the
// home (none: the backend gives a throw-away home), the socket, the CA
// bundle, then each extra mount with its writable paths and its masks.
func WorkspaceBinds(spec Spec) []Bind {
	b := []Bind{{Source: spec.GroupDir, Dest: domain.GroupPath, What: "group folder"}}
	if spec.GlobalDir != "" {
		b = append(b, Bind{Source: spec.GlobalDir, Dest: domain.GlobalPath, ReadOnly: !spec.GlobalWritable, What: "global folder"})
	}
	if spec.SessionDir != "" {
		b = append(b, Bind{Source: spec.SessionDir, Dest: domain.HomePath, What: "session folder"})
	}
	if spec.SocketPath != "" {
		b = append(b, Bind{Source: spec.SocketPath, Dest: domain.SocketPath, What: "host socket"})
	}
	if spec.CABundle != "" {
		b = append(b, Bind{Source: spec.CABundle, Dest: domain.CABundlePath, ReadOnly: true, What: "CA bundle"})
	}
	for _, m := range spec.Extra {
		dest := domain.ExtraPath + "/" + m.Name
		b = append(b, Bind{Source: m.HostPath, Dest: dest, ReadOnly: m.ReadOnly, What: "extra mount " + m.Name})
		for _, w := range m.Writable {
			b = append(b, Bind{Source: w, Dest: TargetFor(dest, m.HostPath, w), What: "writable path of " + m.Name})
		}
		for _, mask := range m.Masks {
			b = append(b, Bind{Source: mask, Dest: TargetFor(dest, m.HostPath, mask), ReadOnly: true, Mask: true, What: "mask in " + m.Name})
		}
	}
	return b
}
