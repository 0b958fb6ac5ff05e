package mounts

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadValid(t *testing.T) {
	tr := newTree(t)
	al := tr.load(t, sampleJSON)
	assert.Equal(t, []Root{
		{Path: "~/projects", Resolved: tr.projects, AllowReadWrite: true, Description: "code"},
		{Path: "~/notes", Resolved: tr.notes},
	}, al.Roots)
	assert.Equal(t, []string{"password", "secret"}, al.Blocked)
	assert.True(t, al.NonMainReadOnly)
	assert.Equal(t, tr.home, al.Home)

	al = tr.load(t, `{"allowedRoots":[{"path":"`+tr.notes+`/"}],"nonMainReadOnly":false}`)
	require.Len(t, al.Roots, 1)
	assert.Equal(t, tr.notes, al.Roots[0].Resolved)
	assert.False(t, al.NonMainReadOnly)

	al = tr.load(t, `{}`)
	assert.Empty(t, al.Roots)
	assert.True(t, al.NonMainReadOnly)
}

func TestLoadMissing(t *testing.T) {
	tr := newTree(t)
	al, err := Load(filepath.Join(tr.base, "nope.json"), tr.home)
	require.ErrorIs(t, err, ErrNoAllowlist)
	assert.Empty(t, al.Roots)
}

func TestLoadMalformed(t *testing.T) {
	tr := newTree(t)
	tests := []struct {
		name, content, want string
	}{
		{"empty file", "", "empty file"},
		{"blank file", " \n\t", "empty file"},
		{"bad JSON", `{"allowedRoots": [`, "invalid JSON"},
		{"not an object", `[]`, "not a JSON object"},
		{"null", `null`, "not a JSON object"},
		{"trailing data", `{} {}`, "after top-level value"},
		{"unknown top-level field", `{"allowedRoots":[],"nonMainReadonly":true}`, `unknown object member name "nonMainReadonly"`},
		{"unknown root field", `{"allowedRoots":[{"path":"~/projects","rw":true}]}`, `unknown object member name "rw"`},
		{"duplicate field", `{"nonMainReadOnly":true,"nonMainReadOnly":false}`, "duplicate"},
		{"wrong type bool", `{"nonMainReadOnly":"yes"}`, "invalid JSON"},
		{"wrong type roots", `{"allowedRoots":"~/projects"}`, "invalid JSON"},
		{"wrong type path", `{"allowedRoots":[{"path":42}]}`, "invalid JSON"},
		{"wrong type pattern", `{"blockedPatterns":[1]}`, "invalid JSON"},
		{"empty root path", `{"allowedRoots":[{"path":""}]}`, `allowedRoots[0] "": empty path`},
		{"relative root", `{"allowedRoots":[{"path":"projects"}]}`, "not an absolute path"},
		{"tilde user root", `{"allowedRoots":[{"path":"~bob/x"}]}`, "~user"},
		{"missing root", `{"allowedRoots":[{"path":"~/projects"},{"path":"~/gone"}]}`, `allowedRoots[1] "~/gone": cannot resolve`},
		{"file root", `{"allowedRoots":[{"path":"~/projects/file.txt"}]}`, "is not a directory"},
		{"blocked root", `{"allowedRoots":[{"path":"~/.ssh"}]}`, `matches blocked pattern ".ssh"`},
		{"root resolving to blocked", `{"allowedRoots":[{"path":"~/projects/innocent"}]}`, `matches blocked pattern ".ssh"`},
		{"empty pattern", `{"blockedPatterns":[""]}`, "empty pattern"},
		{"invisible pattern", `{"blockedPatterns":["\u200b"]}`, "empty pattern"},
		{"pattern with an empty part", `{"blockedPatterns":["a//b"]}`, "must be a name"},
		{"pattern with a dot-dot part", `{"blockedPatterns":["a/../b"]}`, "must be a name"},
		{"pattern of a bare star", `{"blockedPatterns":["*"]}`, "must be a name"},
		{"pattern with a leading slash", `{"blockedPatterns":["/etc"]}`, "must be a name"},
		{"pattern with NUL", `{"blockedPatterns":["a\u0000b"]}`, "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(tr.allowlist, []byte(tt.content), 0o600))
			al, err := Load(tr.allowlist, tr.home)
			require.Error(t, err)
			assert.NotErrorIs(t, err, ErrNoAllowlist)
			assert.Contains(t, err.Error(), "mount allowlist "+tr.allowlist+": ")
			assert.Contains(t, err.Error(), tt.want)
			assert.Empty(t, al.Roots, "a malformed allowlist grants nothing")
		})
	}
}

func TestLoadNoHome(t *testing.T) {
	tr := newTree(t)
	require.NoError(t, os.WriteFile(tr.allowlist, []byte(sampleJSON), 0o600))
	_, err := Load(tr.allowlist, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot expand ~")
}

func TestLoadUnreadable(t *testing.T) {
	tr := newTree(t)
	// A directory where the file should be: not "missing", an error.
	_, err := Load(tr.notes, tr.home)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrNoAllowlist)
}

func TestLoadProtectsDefaults(t *testing.T) {
	tr := newTree(t)
	al := tr.load(t, sampleJSON)
	assert.Contains(t, al.Protected, Protected{Path: tr.allowlist, What: "the mount allowlist", Mode: ProtectAll})
	assert.Contains(t, al.Protected, Protected{Path: tr.home, What: "the home directory", Mode: ProtectContaining})
	assert.Contains(t, al.Protected, Protected{Path: tr.home + "/.config", What: "~/.config", Mode: ProtectAll})
}
