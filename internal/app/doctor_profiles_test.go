package app

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
)

// doctor fails on a malformed profiles file and on a group whose profile
// cannot be used, with the exact fix; a missing file is fine until a group
// names a profile.
func TestProfilesFinding(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := config.Config{DataDir: filepath.Join(dir, "data"), Profiles: filepath.Join(dir, "profiles.json")}
	write := func(content string) { require.NoError(t, os.WriteFile(cfg.Profiles, []byte(content), 0o600)) }
	setGroups := func(gs ...domain.Group) {
		st, err := OpenStore(ctx, cfg)
		require.NoError(t, err)
		defer st.Close()
		for _, g := range gs {
			require.NoError(t, st.PutGroup(ctx, g))
		}
	}
	check := func(v Verdict, want ...string) {
		t.Helper()
		f := profilesFinding(ctx, cfg)
		assert.Equal(t, v, f.Verdict, "%+v", f)
		for _, w := range want {
			assert.Contains(t, f.Detail+" fix: "+f.Fix, w)
		}
	}

	setGroups(domain.Group{ChatID: 42, Folder: "main"}, domain.Group{ChatID: -1, Folder: "family"})
	check(OK, "absent: every group runs with the built-in default")

	setGroups(domain.Group{ChatID: -1, Folder: "family", Profile: "research"})
	check(Fail, "profiles.json does not exist; these groups run nothing: family (profile research)",
		"fix: create "+cfg.Profiles, "`clawpen groups profile family default`")

	write(`{"profiles":{"research":{"cpus":0.5}}}`)
	check(OK, cfg.Profiles+": default, research")

	write(`{"profiles":{"small":{}}}`)
	check(Fail, `does not define "research"; these groups run nothing: family (profile research)`,
		"fix: define them in "+cfg.Profiles+", or give the groups the default: `clawpen groups profile family default`")

	write(`{"profiles":{"research":{"cpus":-1}}}`)
	check(Fail, `profiles file `+cfg.Profiles+`: profile "research": field "cpus"`, "these groups run nothing: family",
		"fix: fix the named field in "+cfg.Profiles)

	setGroups(domain.Group{ChatID: -1, Folder: "family"})
	check(Fail, `field "cpus"`, "only the built-in default can be used")
}

// doctor says whether credential injection can work: the upstream CA file
// holds certificates, the variables credentials name are set.
func TestCredentialsFinding(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"CLAWPEN_PROFILES": filepath.Join(dir, "profiles.json"), "CLAWPEN_DATA_DIR": filepath.Join(dir, "data")}
	cfgOf := func() config.Config {
		c, err := config.FromEnv(func(k string) string { return env[k] })
		require.NoError(t, err)
		return c
	}
	_, shown := credentialsFinding(cfgOf())
	assert.False(t, shown, "nothing to say without credentials")

	require.NoError(t, os.WriteFile(env["CLAWPEN_PROFILES"], []byte(`{"profiles":{"gh":{"network":"allowlist","egress":["api.github.com"],
		"credentials":[{"host":"api.github.com","header":"Authorization","value":"Bearer ${GH_DOCTOR_TOKEN}"}]}}}`), 0o600))
	f, shown := credentialsFinding(cfgOf())
	require.True(t, shown)
	assert.Equal(t, Warn, f.Verdict)
	assert.Contains(t, f.Detail, "profile gh, Authorization for api.github.com:443: GH_DOCTOR_TOKEN is not set")

	env["GH_DOCTOR_TOKEN"] = "ghp_doctor_value_123"
	f, _ = credentialsFinding(cfgOf())
	assert.Equal(t, OK, f.Verdict, f.Detail)
	assert.NotContains(t, f.Detail, "ghp_doctor_value_123")

	env["CLAWPEN_UPSTREAM_CA_FILE"] = filepath.Join(dir, "empty.pem")
	require.NoError(t, os.WriteFile(env["CLAWPEN_UPSTREAM_CA_FILE"], []byte("not a certificate"), 0o600))
	f, _ = credentialsFinding(cfgOf())
	assert.Equal(t, Fail, f.Verdict)
	assert.Contains(t, f.Detail, "holds no PEM certificate")
}
