package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// unitSettings reads configs/clawpen.service: key -> values, in order.
func unitSettings(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, "not a setting: %q", line)
		out[k] = append(out[k], v)
	}
	require.NoError(t, sc.Err())
	return out
}

// The unit is hardened, but never in a way that takes from bubblewrap
// what it needs to make its namespaces or from the host its cgroups.
func TestServiceUnitHardenedButLetsSandboxesRun(t *testing.T) {
	root, err := harness.Root()
	require.NoError(t, err)
	unit := filepath.Join(root, "configs", "clawpen.service")
	s := unitSettings(t, unit)
	for key, want := range map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "read-only", "PrivateTmp": "yes",
		"Restart": "on-failure", "Delegate": "yes", "RuntimeDirectory": "clawpen",
	} {
		assert.Equal(t, []string{want}, s[key], key)
	}
	require.NotEmpty(t, s["WorkingDirectory"])
	assert.Contains(t, s["ReadWritePaths"], s["WorkingDirectory"][0], "data/ and groups/ stay writable")
	for _, key := range []string{"RestrictNamespaces", "SystemCallFilter", "ProtectControlGroups", "PrivateUsers", "CapabilityBoundingSet"} {
		assert.NotContains(t, s, key, "%s would stop bubblewrap's namespaces or the host's cgroups", key)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (apt-get install systemd): the unit's syntax is not verified")
	}
	// verify insists that ExecStart exists: point it at the built binary.
	data, err := os.ReadFile(unit)
	require.NoError(t, err)
	tmp := filepath.Join(t.TempDir(), "clawpen.service")
	require.NoError(t, os.WriteFile(tmp, []byte(strings.ReplaceAll(string(data), "/usr/local/bin/clawpen", filepath.Join(harness.BinDir(), "clawpen"))), 0o644))
	out, err := exec.Command(analyze, "verify", tmp).CombinedOutput()
	require.NoError(t, err, "systemd-analyze verify: %s", out)
	for line := range strings.Lines(string(out)) {
		// Unknown or malformed settings are only warnings: fail on them too.
		assert.NotContains(t, line, "clawpen.service", "systemd-analyze verify warns")
	}
}
