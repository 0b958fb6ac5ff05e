package mounts

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// tree is a real directory tree for the tests:
//
//	<base>/home                     fake $HOME
//	  projects/                     root, read-write ("code")
//	    app/{src/main.go, .env, id_rsa, .git/credentials, .ssh/keys/}
//	    app/link-in  -> app/src     (stays inside)
//	    app/link-out -> <base>/outside
//	    app/link-etc -> /etc
//	    innocent     -> app/.ssh    (innocent name, blocked target)
//	    file.txt, passwords/, My.SSH/, ．ｓｓｈ/, .ѕsh/, сredentials/, .s<ZWSP>sh/
//	    clawpen/{.env, src/, data/sessions/}   the project with its data dir
//	  projects2/                    prefix sibling, not a root
//	  notes/                        root, read-only
//	  rootlink -> projects          a symlinked root
//	  .ssh/, .config/clawpen/
//	<base>/outside/{.env}
type tree struct {
	base, home, projects, projects2, notes, outside, app, allowlist string
}

func mk(t testing.TB, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
}

func touch(t testing.TB, files ...string) {
	t.Helper()
	for _, f := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
		require.NoError(t, os.WriteFile(f, []byte("x"), 0o644))
	}
}

func link(t testing.TB, target, at string) {
	t.Helper()
	require.NoError(t, os.Symlink(target, at))
}

func newTree(t testing.TB) tree {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	tr := tree{
		base:      base,
		home:      filepath.Join(base, "home"),
		projects:  filepath.Join(base, "home", "projects"),
		projects2: filepath.Join(base, "home", "projects2"),
		notes:     filepath.Join(base, "home", "notes"),
		outside:   filepath.Join(base, "outside"),
	}
	tr.app = filepath.Join(tr.projects, "app")
	tr.allowlist = filepath.Join(tr.home, ".config", "clawpen", "mount-allowlist.json")
	p := tr.projects
	mk(t, tr.projects2, tr.notes, tr.outside,
		filepath.Join(tr.app, "src"), filepath.Join(tr.app, ".ssh", "keys"),
		filepath.Join(p, "passwords"), filepath.Join(p, "My.SSH"),
		filepath.Join(p, "．ｓｓｈ"), filepath.Join(p, ".ѕsh"), filepath.Join(p, "сredentials"),
		filepath.Join(p, ".s\u200bsh"),
		filepath.Join(p, "clawpen", "src"), filepath.Join(p, "clawpen", "data", "sessions"),
		filepath.Join(tr.home, ".ssh"), filepath.Join(tr.home, ".config", "clawpen"))
	touch(t, filepath.Join(tr.app, "src", "main.go"), filepath.Join(tr.app, ".env"),
		filepath.Join(tr.app, "id_rsa"), filepath.Join(tr.app, ".git", "credentials"),
		filepath.Join(p, "file.txt"), filepath.Join(p, "clawpen", ".env"),
		filepath.Join(tr.outside, ".env"))
	link(t, "src", filepath.Join(tr.app, "link-in"))
	link(t, tr.outside, filepath.Join(tr.app, "link-out"))
	link(t, "/etc", filepath.Join(tr.app, "link-etc"))
	link(t, "app/.ssh", filepath.Join(p, "innocent"))
	link(t, "projects", filepath.Join(tr.home, "rootlink"))
	return tr
}

// sampleJSON is DESIGN.md's example allowlist.
const sampleJSON = `{
  "allowedRoots": [
    {"path": "~/projects", "allowReadWrite": true, "description": "code"},
    {"path": "~/notes", "allowReadWrite": false}
  ],
  "blockedPatterns": ["password", "secret"],
  "nonMainReadOnly": true
}`

// load writes content as the tree's allowlist file and loads it.
func (tr tree) load(t testing.TB, content string) Allowlist {
	t.Helper()
	require.NoError(t, os.WriteFile(tr.allowlist, []byte(content), 0o600))
	al, err := Load(tr.allowlist, tr.home)
	require.NoError(t, err)
	return al
}

// socket creates a unix socket at path; the listener is closed at cleanup
// (the socket file stays, which is what the tests inspect).
func socket(t testing.TB, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
}

func writeFile(path, content string) error {
	return os.WriteFile(path, []byte(content), 0o600)
}
