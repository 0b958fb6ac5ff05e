package router

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
)

// /status names the file's problem and every group it stops; /groups marks
// each such group.
func TestProfilesStatus(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"profiles":{"web":{"network":"allowlist","egress":["pypi.org"]}}}`), 0o600))
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"profiles":{"web":{"pids":1}}}`), 0o600))
	missing := filepath.Join(dir, "missing.json")
	plain := []domain.Group{{Folder: "main"}, {Folder: "family"}}
	named := []domain.Group{{Folder: "main"}, {Folder: "family", Profile: "web"}, {Folder: "work", Profile: "gone"}}

	for _, tc := range []struct {
		name   string
		path   string
		groups []domain.Group
		want   string
	}{
		{"no file, nobody named one", missing, plain, "Profiles: no file at " + missing + "; only the built-in default."},
		{"good file", good, plain, "Profiles: default, web (" + good + ")."},
		{"good file, one undefined", good, named, "Profiles: default, web (" + good + ").\n" +
			"Profile problem, this group runs nothing: work (profile gone: not defined). Fix the file, or /profile <folder> default."},
		{"no file, two named", missing, named, "Profiles: no file at " + missing + "; only the built-in default.\n" +
			"Profile problem, these groups run nothing: family (profile web: no profiles file) and work (profile gone: no profiles file). Fix the file, or /profile <folder> default."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, profilesStatus(config.ReadProfiles(tc.path), tc.groups))
		})
	}
	t.Run("broken file", func(t *testing.T) {
		got := profilesStatus(config.ReadProfiles(bad), named)
		assert.Contains(t, got, "Profiles: the file cannot be used, so only the built-in default runs: ` profiles file "+bad+`: profile "web": field "pids"`)
		assert.Contains(t, got, "family (profile web: the file is broken) and work (profile gone: the file is broken)")
	})

	now := config.ReadProfiles(good)
	require.NoError(t, os.WriteFile(good, []byte(`{"profiles":{"web":{"network":"allowlist","egress":["pypi.org"]},"cheap":{"model":"claude-haiku-4-5"}}}`), 0o600))
	models := []domain.Group{{Folder: "main"}, {Folder: "family", Profile: "cheap"}, {Folder: "kids", Profile: "cheap"}, {Folder: "work", Profile: "web"}, {Folder: "gone", Profile: "gone"}}
	assert.Equal(t, "Models: family and kids on claude-haiku-4-5 (profile cheap); main and work on claude-test (the host's).",
		modelsStatus(config.ReadProfiles(good), models, "claude-test"), "a profile's model, else the host's; a group that runs nothing is left out")
	assert.Equal(t, ", profile default", profileNote(now, domain.Group{Folder: "family"}))
	assert.Equal(t, ", profile web", profileNote(now, domain.Group{Folder: "family", Profile: "web"}))
	assert.Contains(t, profileNote(now, domain.Group{Folder: "family", Profile: "gone"}), `, profile gone — CANNOT BE USED, nothing runs: `+"` "+`profile "gone" is not defined in `+good)
}
