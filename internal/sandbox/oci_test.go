package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The description maps every bind's source through the backend, hides
// masks itself, and gives a throw-away home when there is no session dir.
func TestOCISpecMountsTheView(t *testing.T) {
	x := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(x, "secrets"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(x, ".env"), nil, 0o644))
	spec := Spec{GroupDir: "/g", Extra: []Mount{{HostPath: x, Name: "x", ReadOnly: true,
		Masks: []string{filepath.Join(x, "secrets"), filepath.Join(x, ".env")}}}}
	s, err := OCISpec(spec, []string{"/bin/true"}, func(b Bind) (string, error) { return "/pin" + b.Source, nil })
	require.NoError(t, err)
	got := map[string]string{}
	for _, m := range s.Mounts {
		got[m.Destination] = m.Type + " " + m.Source
		if m.Destination == "/workspace/extra/x/secrets" {
			assert.Equal(t, []string{"ro", "nosuid", "nodev", "mode=0555", "size=4096"}, m.Options)
		}
	}
	assert.Equal(t, map[string]string{
		"/tmp":                       "tmpfs tmpfs",
		"/dev/shm":                   "tmpfs tmpfs",
		"/workspace/group":           "bind /pin/g",
		"/workspace/extra/x":         "bind /pin" + x,
		"/workspace/extra/x/secrets": "tmpfs tmpfs",
		"/workspace/extra/x/.env":    "bind /dev/null",
		"/home/agent":                "tmpfs tmpfs",
	}, got)
	assert.Equal(t, []string{"/bin/true"}, s.Process.Args)
	assert.Equal(t, int64(DefaultLimits.Pids), s.Linux.Resources.Pids.Limit)
	assert.Equal(t, int64(100000), *s.Linux.Resources.CPU.Quota, "one CPU")
}
