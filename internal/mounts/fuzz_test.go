package mounts

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/clawpen/clawpen/internal/domain"
)

func FuzzValidate(f *testing.F) {
	tr := newTree(f)
	al := tr.load(f, `{"allowedRoots":[{"path":"~/projects","allowReadWrite":true},{"path":"~/notes"}],"blockedPatterns":["password"],"nonMainReadOnly":true}`)
	if err := al.Protect(filepath.Join(tr.projects, "clawpen", "data"), "the data dir", ProtectAll); err != nil {
		f.Fatal(err)
	}
	if err := al.Protect(filepath.Join(tr.projects, "clawpen"), "the project", ProtectNonMain); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		"~/projects", "~/projects/app/src", "~/projects/app/link-in", "~/projects/app/link-out",
		"~/projects/app/link-out/..", "~/projects/../.ssh", "~/projects2", "~/projects/．ｓｓｈ",
		"~/projects/innocent", "~/rootlink/clawpen/data", "~/projects/clawpen", "/", "", "~",
		tr.app + "/../app/./src//", "~/notes/../projects/passwords", "relative", "~x",
	} {
		for _, name := range []string{"code", "../x", "a:b", "-x", ""} {
			f.Add(s, name, false, true)
			f.Add(s, name, true, false)
		}
	}
	f.Fuzz(func(t *testing.T, hostPath, name string, readOnly, isMain bool) {
		req := domain.MountRequest{HostPath: hostPath, ContainerPath: name, ReadOnly: readOnly}
		m, err := Validate(al, req, isMain)
		if err != nil {
			var r *Refusal
			if !errors.As(err, &r) || r.Rule == "" || r.Path != hostPath {
				t.Fatalf("refusal %#v is not a complete *Refusal", err)
			}
			return
		}
		if err := ValidateName(m.Name); err != nil || m.Name != name {
			t.Fatalf("allowed bad name %q: %v", m.Name, err)
		}
		if _, ok := al.rootOf(m.HostPath); !ok {
			t.Fatalf("allowed %q -> %q outside every root", hostPath, m.HostPath)
		}
		if real, err := filepath.EvalSymlinks(m.HostPath); err != nil || real != m.HostPath {
			t.Fatalf("HostPath %q is not resolved (%q, %v)", m.HostPath, real, err)
		}
		folded := al.patterns()
		if c, _, hit := blockedComponent(m.HostPath, folded); hit {
			t.Fatalf("allowed %q with blocked component %q", m.HostPath, c)
		}
		if c, _, hit := blockedComponent(hostPath, folded); hit {
			t.Fatalf("allowed %q with blocked component %q as written", hostPath, c)
		}
		if r := al.checkProtected(hostPath, m.HostPath, isMain); r != nil {
			t.Fatalf("allowed protected %q: %v", m.HostPath, r)
		}
		if !m.ReadOnly && (readOnly || !isMain) {
			t.Fatalf("read-write granted for %+v isMain=%v", req, isMain)
		}
	})
}

func FuzzLoad(f *testing.F) {
	tr := newTree(f)
	for _, s := range []string{
		sampleJSON, `{}`, ``, `null`, `[]`, `{"allowedRoots":[{"path":"~/projects"}]}`,
		`{"allowedRoots":[{"path":"/"}]}`, `{"allowedRoots":[{"path":"~/.ssh"}]}`,
		`{"allowedRoots":[null]}`, `{"blockedPatterns":["", "/"]}`, `{"nonMainReadOnly":1}`,
		`{"allowedRoots":[{"path":"~/projects","PATH":"x"}]}`, `{"allowedRoots":[]} x`,
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(tr.base, "fuzz.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		al, err := Load(path, tr.home)
		if err != nil {
			if len(al.Roots) != 0 {
				t.Fatalf("error %v with roots %v", err, al.Roots)
			}
			return
		}
		folded := al.patterns()
		for _, r := range al.Roots {
			fi, err := os.Stat(r.Resolved)
			if !isAbs(r.Resolved) || err != nil || !fi.IsDir() {
				t.Fatalf("root %+v is not an existing absolute directory", r)
			}
			if _, _, hit := blockedComponent(r.Resolved, folded); hit {
				t.Fatalf("root %+v is blocked", r)
			}
		}
		for _, p := range al.Blocked {
			if fold(p) == "" {
				t.Fatalf("empty pattern %q accepted", p)
			}
		}
	})
}
