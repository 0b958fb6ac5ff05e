package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/store"
)

// `profiles list` shows what the owner allowed groups under egress_ask;
// `profiles revoke` takes it back, as /revoke does.
func TestProfilesRevoke(t *testing.T) {
	h := newHost(t)
	h.ok("groups", "add", "-1001", "family")
	require.NoError(t, os.WriteFile(filepath.Join(h.dir, "profiles.json"), []byte(`{"profiles":{"asker":{"network":"allowlist","egress":["pypi.org"],"egress_ask":true}}}`), 0o600))
	st, err := store.Open(context.Background(), filepath.Join(h.dir, "data", "clawpen.db"))
	require.NoError(t, err)
	at := time.Date(2026, 11, 23, 9, 30, 0, 0, time.UTC)
	require.NoError(t, st.AllowEgress(context.Background(), store.EgressAllowance{Group: "family", Host: "example.org", Port: 443, AllowedBy: 42, Allowed: at}))
	require.NoError(t, st.Close())

	list := h.ok("profiles", "list")
	assert.Contains(t, list, "pypi.org (else ask the owner)")
	assert.Regexp(t, `family\s+example.org:443\s+2026-11-23 09:30`, list)

	code, _, errs := h.run("profiles", "revoke", "family", "example.com")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "family had no allowance for example.com")
	assert.Contains(t, h.ok("profiles", "revoke", "family", "example.org:443"), "revoked: family is asked about example.org:443 again")
	assert.NotContains(t, h.ok("profiles", "list"), "Allowed by the owner")
	code, _, _ = h.run("profiles", "revoke", "family")
	assert.Equal(t, 2, code, "usage")
}
