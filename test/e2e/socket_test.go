package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// A project deep in the filesystem answers: its runs' sockets are made
// however long the data dir's path is (bind(2) takes 107 bytes of it), and
// doctor, run beside the serving host, agrees and leaves it working.
func TestAnswersFromALongDataDir(t *testing.T) {
	long := filepath.Join(strings.Repeat("a-long-directory-name/", 6), "data")
	h := harness.New(t, harness.Options{Owner: true, Extra: map[string]string{"CLAWPEN_DATA_DIR": long}})
	require.Greater(t, len(filepath.Join(h.Dir, long)), 120)

	h.OwnerSays("hello from deep down")
	got := h.Replies(harness.OwnerID, 1)
	assert.Contains(t, got[0], "hello from deep down")

	out := h.CLI("doctor")
	assert.Contains(t, out, "ok   socket")
	h.OwnerSays("still here")
	got = h.Replies(harness.OwnerID, 2)
	assert.Contains(t, got[1], "still here")
}
