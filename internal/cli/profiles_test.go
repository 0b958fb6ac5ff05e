package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// `groups profile` gives only what the file defines now; `profiles list`
// shows every profile with its users; `profiles check` fails on a broken
// file and on a group naming an undefined profile, naming what to fix.
func TestProfilesCommands(t *testing.T) {
	h := newHost(t)
	path := filepath.Join(h.dir, "profiles.json")
	write := func(content string) { require.NoError(t, os.WriteFile(path, []byte(content), 0o600)) }
	h.ok("groups", "add", "-1001", "family")
	h.ok("groups", "add", "-1002", "work")

	// No file: only default; naming anything else is refused.
	assert.Contains(t, h.ok("profiles", "check"), "does not exist: only the built-in default")
	code, _, errs := h.run("groups", "profile", "family", "research")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "no profiles file")
	assert.Contains(t, h.ok("groups", "profile", "family", "default"), "family now runs with the profile default")

	write(`{"profiles":{"research":{"network":"allowlist","egress":["pypi.org","*.github.com:443"],"memory_mb":512,"cpus":0.5,"timeout":"2m","tools":["web_search"],"daily_tokens":1000,"model":"claude-haiku-4-5","transcribe":false}}}`)
	assert.Contains(t, h.ok("groups", "profile", "family", "research"), "family now runs with the profile research")
	code, _, errs = h.run("groups", "profile", "work", "nope")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, `profile "nope" is not defined in `+path)
	code, _, errs = h.run("groups", "profile", "nobody", "research")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "no group has the folder nobody")

	list := h.ok("profiles", "list")
	assert.Regexp(t, `default\s+none\s+-\s+\(1024 MiB\)\s+\(256\)\s+\(1\)\s+\(10m0s\)\s+\(1024 MiB\)\s+-\s+no budget\s+\(claude-sonnet-4-5\)\s+yes\s+work`, list)
	assert.Regexp(t, `research\s+allowlist\s+pypi.org,\*.github.com:443\s+512 MiB\s+\(256\)\s+0.5\s+2m0s\s+\(1024 MiB\)\s+web_search\s+1000\s+claude-haiku-4-5\s+no\s+family`, list)
	assert.Regexp(t, `family\s+-1001\s+family\s+research\s`, h.ok("groups", "list"))
	assert.Contains(t, h.ok("profiles", "check"), "is valid: default, research")

	// The profile disappears from the file: the group runs nothing, and
	// every listing says so.
	write(`{"profiles":{"small":{"pids":64}}}`)
	code, _, errs = h.run("profiles", "check")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, `group family runs nothing: profile "research" is not defined in `+path+" (define it, or `clawpen groups profile family default`)")
	assert.Contains(t, h.ok("profiles", "list"), "research  (undefined: these groups run nothing)")
	assert.Contains(t, h.ok("groups", "list"), "research (cannot be used: runs nothing)")

	// A malformed file: check names file, profile and field.
	write(`{"profiles":{"small":{"pids":1}}}`)
	code, _, errs = h.run("profiles", "check")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "profiles file "+path+`: profile "small": field "pids": 1: want 16 to 65536`)
	assert.Contains(t, errs, "group family runs nothing: its profile research cannot be used while the file is broken")
	code, _, errs = h.run("groups", "profile", "work", "small")
	assert.Equal(t, 1, code, "no name but default while the file is broken")
	assert.Contains(t, errs, `field "pids"`)
	h.ok("groups", "profile", "family", "default")
	code, _, _ = h.run("profiles", "check")
	assert.Equal(t, 1, code, "the file itself is still broken")
}

// `profiles check` fails while a credential names a variable the host's
// environment does not set, naming the profile, host and variable (never a
// value), and passes once it is set.
func TestProfilesCheckCredentialVariables(t *testing.T) {
	h := newHost(t)
	path := filepath.Join(h.dir, "profiles.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"profiles":{"gh":{"network":"allowlist","egress":["api.github.com"],
		"credentials":[{"host":"api.github.com","header":"Authorization","value":"Bearer ${GH_TOKEN_TEST}"}]}}}`), 0o600))
	code, _, errs := h.run("profiles", "check")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "profile gh: credential Authorization for api.github.com:443: GH_TOKEN_TEST is not set in the host's environment")
	h.env["GH_TOKEN_TEST"] = "ghp_secretvalue123"
	out := h.ok("profiles", "check")
	assert.NotContains(t, out, "ghp_secretvalue123")
}
