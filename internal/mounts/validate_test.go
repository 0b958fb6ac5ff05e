package mounts

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

func TestValidate(t *testing.T) {
	tr := newTree(t)
	al := tr.load(t, sampleJSON)
	socket(t, filepath.Join(tr.projects, "s.sock"))

	tests := []struct {
		name     string
		hostPath string
		rule     string // "" = allowed
		host     string // resolved HostPath when allowed
		reason   string // substring of the refusal reason
	}{
		{name: "root itself", hostPath: "~/projects", host: tr.projects},
		{name: "dir under root via ~", hostPath: "~/projects/app/src", host: tr.app + "/src"},
		{name: "absolute path", hostPath: tr.app + "/src", host: tr.app + "/src"},
		{name: "trailing slash", hostPath: "~/projects/app/", host: tr.app},
		{name: "dot-dot staying inside", hostPath: "~/projects/app/../app/./src", host: tr.app + "/src"},
		{name: "symlink inside root", hostPath: "~/projects/app/link-in", host: tr.app + "/src"},
		{name: "regular file", hostPath: "~/projects/file.txt", host: tr.projects + "/file.txt"},
		{name: "via symlinked dir", hostPath: "~/rootlink/app", host: tr.app},

		{name: "empty", hostPath: "", rule: RuleHostPath, reason: "empty"},
		{name: "relative", hostPath: "projects/app", rule: RuleHostPath, reason: "relative"},
		{name: "dot relative", hostPath: "./projects", rule: RuleHostPath, reason: "relative"},
		{name: "tilde user", hostPath: "~root/x", rule: RuleHostPath, reason: "~user"},
		{name: "NUL", hostPath: "~/projects\x00/app", rule: RuleHostPath, reason: "NUL"},
		{name: "missing", hostPath: "~/projects/nope", rule: RuleNotFound, reason: "does not exist"},
		{name: "prefix sibling", hostPath: "~/projects2", rule: RuleOutsideRoots, reason: "resolves to " + tr.projects2 + " which is outside every allowed root"},
		{name: "dot-dot escaping", hostPath: "~/projects/../projects2", rule: RuleOutsideRoots},
		{name: "home itself", hostPath: "~", rule: RuleOutsideRoots},
		{name: "symlink escaping", hostPath: "~/projects/app/link-out", rule: RuleOutsideRoots, reason: tr.outside},
		{name: "symlink to /etc", hostPath: "~/projects/app/link-etc", rule: RuleOutsideRoots, reason: "resolves to /etc which is outside every allowed root"},
		// Lexically link-out/.. is app (allowed); the kernel goes to <base>.
		{name: "symlink then dot-dot", hostPath: "~/projects/app/link-out/..", rule: RuleOutsideRoots, reason: tr.base + " which"},
		{name: "slash", hostPath: "/", rule: RuleOutsideRoots},

		{name: "blocked as written", hostPath: "~/projects/../.ssh", rule: RuleBlocked, reason: `path component ".ssh" matches blocked pattern ".ssh"`},
		{name: "blocked in the middle", hostPath: "~/projects/app/.ssh/keys", rule: RuleBlocked, reason: `".ssh"`},
		{name: "blocked file", hostPath: "~/projects/app/.env", rule: RuleBlocked, reason: `".env"`},
		{name: "blocked nested component", hostPath: "~/projects/app/.git/credentials", rule: RuleBlocked, reason: `"credentials"`},
		{name: "file pattern as substring", hostPath: "~/projects/passwords", rule: RuleBlocked, reason: `component "passwords" matches blocked pattern "password"`},
		{name: "case variant", hostPath: "~/projects/My.SSH", rule: RuleBlocked, reason: `".ssh"`},
		{name: "fullwidth", hostPath: "~/projects/．ｓｓｈ", rule: RuleBlocked, reason: `".ssh"`},
		{name: "cyrillic dze", hostPath: "~/projects/.ѕsh", rule: RuleBlocked, reason: `".ssh"`},
		{name: "cyrillic es", hostPath: "~/projects/сredentials", rule: RuleBlocked, reason: `"credentials"`},
		{name: "zero-width space", hostPath: "~/projects/.s\u200bsh", rule: RuleBlocked, reason: `".ssh"`},
		{name: "innocent name, blocked target", hostPath: "~/projects/innocent", rule: RuleBlocked, reason: "resolves to " + tr.app + "/.ssh"},
		{name: "blocked but missing", hostPath: "~/projects/.aws", rule: RuleBlocked},

		{name: "socket", hostPath: "~/projects/s.sock", rule: RuleFileType, reason: "socket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Validate(al, domain.MountRequest{HostPath: tt.hostPath, ContainerPath: "x", ReadOnly: true}, true)
			if tt.rule == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.host, m.HostPath)
				assert.Equal(t, "x", m.Name)
				assert.True(t, m.ReadOnly)
				return
			}
			require.Error(t, err)
			var r *Refusal
			require.True(t, errors.As(err, &r), "error %v is not a *Refusal", err)
			assert.Equal(t, tt.rule, r.Rule, r.Reason)
			assert.Equal(t, tt.hostPath, r.Path)
			assert.Contains(t, r.Reason, tt.reason)
			assert.True(t, strings.HasPrefix(err.Error(), "mount "), err.Error())
			assert.Zero(t, m)
		})
	}
}

func TestValidateErrorText(t *testing.T) {
	tr := newTree(t)
	al := tr.load(t, sampleJSON)
	_, err := Validate(al, domain.MountRequest{HostPath: "~/projects/../.ssh", ContainerPath: "k"}, true)
	assert.EqualError(t, err, `mount "~/projects/../.ssh": path component ".ssh" matches blocked pattern ".ssh"`)
	_, err = Validate(al, domain.MountRequest{HostPath: "~/projects/app/link-etc", ContainerPath: "k"}, true)
	assert.EqualError(t, err, `mount "~/projects/app/link-etc": resolves to /etc which is outside every allowed root`)
	_, err = Validate(al, domain.MountRequest{HostPath: "~/projects", ContainerPath: "../x"}, true)
	assert.EqualError(t, err, `mount "~/projects": containerPath "../x" must be a plain name (no "..")`)
}

func TestValidateNoRoots(t *testing.T) {
	tr := newTree(t)
	al, err := Load(filepath.Join(tr.base, "absent.json"), tr.home)
	require.ErrorIs(t, err, ErrNoAllowlist)
	_, err = Validate(al, domain.MountRequest{HostPath: tr.projects, ContainerPath: "p"}, true)
	var r *Refusal
	require.ErrorAs(t, err, &r)
	assert.Equal(t, RuleNoRoots, r.Rule)
	_, err = Validate(Allowlist{}, domain.MountRequest{HostPath: "/", ContainerPath: "p"}, true)
	require.ErrorAs(t, err, &r)
	assert.Equal(t, RuleNoRoots, r.Rule)
}

func TestValidateSymlinkedRoot(t *testing.T) {
	tr := newTree(t)
	al := tr.load(t, `{"allowedRoots":[{"path":"~/rootlink","allowReadWrite":true}]}`)
	require.Len(t, al.Roots, 1)
	assert.Equal(t, "~/rootlink", al.Roots[0].Path)
	assert.Equal(t, tr.projects, al.Roots[0].Resolved)

	m, err := Validate(al, domain.MountRequest{HostPath: tr.app, ContainerPath: "app"}, true)
	require.NoError(t, err)
	assert.Equal(t, tr.app, m.HostPath)
	assert.False(t, m.ReadOnly)
	_, err = Validate(al, domain.MountRequest{HostPath: "~/rootlink/../projects2", ContainerPath: "p"}, true)
	var r *Refusal
	require.ErrorAs(t, err, &r)
	assert.Equal(t, RuleOutsideRoots, r.Rule)
}

func TestValidateNestedRootsDeepestWins(t *testing.T) {
	tr := newTree(t)
	al := tr.load(t, `{"allowedRoots":[
		{"path":"~/projects","allowReadWrite":true},
		{"path":"~/projects/app/src","allowReadWrite":false}]}`)
	m, err := Validate(al, domain.MountRequest{HostPath: "~/projects/app/src", ContainerPath: "s"}, true)
	require.NoError(t, err)
	assert.True(t, m.ReadOnly)
	m, err = Validate(al, domain.MountRequest{HostPath: "~/projects/app", ContainerPath: "s"}, true)
	require.NoError(t, err)
	assert.False(t, m.ReadOnly)
}

func TestValidateName(t *testing.T) {
	long := strings.Repeat("a", MaxNameLen)
	tests := []struct {
		name string
		ok   bool
	}{
		{"code", true}, {"my-notes_2.d", true}, {".hidden", true}, {long, true}, {"A.b-C_9", true},
		{"", false}, {".", false}, {"..", false}, {"a..b", false}, {"../x", false},
		{"a/b", false}, {"/abs", false}, {"a:b", false}, {"a\x00b", false}, {"-rf", false},
		{"a b", false}, {"tab\there", false}, {"new\nline", false}, {"ünï", false},
		{long + "a", false}, {"x\u200b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateName(tt.name)
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

func TestValidateReadWriteMatrix(t *testing.T) {
	tr := newTree(t)
	tests := []struct {
		requestRW, rootRW, isMain, nonMainRO bool
		wantRW                               bool
	}{
		{false, false, false, false, false},
		{false, false, false, true, false},
		{false, false, true, false, false},
		{false, false, true, true, false},
		{false, true, false, false, false},
		{false, true, false, true, false},
		{false, true, true, false, false},
		{false, true, true, true, false},
		{true, false, false, false, false},
		{true, false, false, true, false},
		{true, false, true, false, false},
		{true, false, true, true, false},
		{true, true, false, false, true},
		{true, true, false, true, false},
		{true, true, true, false, true},
		{true, true, true, true, true},
	}
	for _, tt := range tests {
		name := strings.NewReplacer("true", "1", "false", "0").Replace(
			strings.Join([]string{"req", bs(tt.requestRW), "root", bs(tt.rootRW), "main", bs(tt.isMain), "nmro", bs(tt.nonMainRO)}, "_"))
		t.Run(name, func(t *testing.T) {
			al := tr.load(t, `{"allowedRoots":[{"path":"~/projects","allowReadWrite":`+bs(tt.rootRW)+`}],"nonMainReadOnly":`+bs(tt.nonMainRO)+`}`)
			ds := Check(al, []domain.MountRequest{{HostPath: "~/projects/app", ContainerPath: "app", ReadOnly: !tt.requestRW}}, tt.isMain)
			require.Len(t, ds, 1)
			require.NoError(t, ds[0].Err)
			assert.Equal(t, !tt.wantRW, ds[0].Mount.ReadOnly)
			if tt.requestRW && !tt.wantRW {
				assert.Contains(t, ds[0].Note, "read-only:")
			} else {
				assert.Empty(t, ds[0].Note)
			}
		})
	}
}

func bs(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func TestValidateNonMainReadOnlyDefaultsTrue(t *testing.T) {
	tr := newTree(t)
	al := tr.load(t, `{"allowedRoots":[{"path":"~/projects","allowReadWrite":true}]}`)
	assert.True(t, al.NonMainReadOnly)
	m, err := Validate(al, domain.MountRequest{HostPath: "~/projects", ContainerPath: "p"}, false)
	require.NoError(t, err)
	assert.True(t, m.ReadOnly)
}

func TestValidateProtected(t *testing.T) {
	tr := newTree(t)
	project := filepath.Join(tr.projects, "clawpen")
	// The allowlist lives inside a root here, to test that it is protected by itself.
	allowIn := filepath.Join(tr.projects, "allow.json")
	touch(t, allowIn)
	require.NoError(t, writeFile(allowIn, `{"allowedRoots":[{"path":"~","allowReadWrite":true},{"path":"`+tr.base+`"}],"nonMainReadOnly":false}`))
	al, err := Load(allowIn, tr.home)
	require.NoError(t, err)
	require.NoError(t, al.Protect(filepath.Join(project, "data"), "the data dir", ProtectAll))
	require.NoError(t, al.Protect(project, "the clawpen project", ProtectNonMain))
	require.Error(t, al.Protect("data", "relative", ProtectAll))

	tests := []struct {
		name     string
		hostPath string
		isMain   bool
		ok       bool
		reason   string
	}{
		{"project, main", "~/projects/clawpen", true, true, ""},
		{"project, non-main", "~/projects/clawpen", false, false, "which is the clawpen project"},
		{"inside project, non-main", "~/projects/clawpen/src", false, false, "which is inside the clawpen project"},
		{"inside project, main", "~/projects/clawpen/src", true, true, ""},
		{"containing project, non-main", "~/projects", false, false, "contains the mount allowlist"},
		{"containing project, main", "~/projects", true, true, ""},
		{"data dir, main", "~/projects/clawpen/data", true, false, "which is the data dir"},
		{"inside data dir, main", "~/projects/clawpen/data/sessions", true, false, "which is inside the data dir"},
		{"data dir via symlink, main", "~/rootlink/clawpen/data", true, false, "the data dir"},
		{"allowlist file, main", "~/projects/allow.json", true, false, "which is the mount allowlist"},
		{"home, main", "~", true, false, "which is the home directory"},
		{"containing home, main", tr.base, true, false, "contains the home directory"},
		{"inside home, non-main", "~/notes", false, true, ""},
		{"~/.config, main", "~/.config", true, false, "which is ~/.config"},
		{"inside ~/.config, main", "~/.config/clawpen", true, false, "which is inside ~/.config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Validate(al, domain.MountRequest{HostPath: tt.hostPath, ContainerPath: "p"}, tt.isMain)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			var r *Refusal
			require.ErrorAs(t, err, &r)
			assert.Equal(t, RuleProtected, r.Rule)
			assert.Contains(t, r.Reason, tt.reason)
		})
	}
}

func TestValidateProtectedNotYetExisting(t *testing.T) {
	tr := newTree(t)
	al := tr.load(t, sampleJSON)
	// The data dir does not exist yet; a mount containing it is still refused.
	require.NoError(t, al.Protect(filepath.Join(tr.app, "src", "later", "data"), "the data dir", ProtectAll))
	_, err := Validate(al, domain.MountRequest{HostPath: "~/rootlink/app/src", ContainerPath: "p"}, false)
	var r *Refusal
	require.ErrorAs(t, err, &r)
	assert.Equal(t, RuleProtected, r.Rule)
}

// A host in a container can have the engine bind only what it shares with
// it: everything else is refused, by the resolved path (a symlink inside the
// shared tree pointing out of it is refused too).
func TestValidateConfined(t *testing.T) {
	tr := newTree(t)
	al := tr.load(t, `{"allowedRoots":[{"path":"~/projects","allowReadWrite":true},{"path":"`+tr.base+`/outside"}],"nonMainReadOnly":false}`)
	require.Error(t, al.Confine("projects", "relative"))
	require.NoError(t, al.Confine(tr.projects, "CLAWPEN_ROOT, shared with the engine"))
	for _, tt := range []struct {
		hostPath string
		ok       bool
	}{
		{"~/projects/app/src", true},
		{"~/rootlink/app/src", true},
		{"~/projects", true},
		{tr.outside, false},
		{"~/projects/app/link-out", false},
	} {
		t.Run(tt.hostPath, func(t *testing.T) {
			m, err := Validate(al, domain.MountRequest{HostPath: tt.hostPath, ContainerPath: "p"}, true)
			if tt.ok {
				require.NoError(t, err)
				assert.True(t, within(m.HostPath, tr.projects))
				return
			}
			var r *Refusal
			require.ErrorAs(t, err, &r)
			assert.Equal(t, RuleNotBindable, r.Rule)
			assert.Contains(t, r.Reason, "resolves to "+tr.outside+", outside "+tr.projects+" (CLAWPEN_ROOT, shared with the engine)")
		})
	}
}
