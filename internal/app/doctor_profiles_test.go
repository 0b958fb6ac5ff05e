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
