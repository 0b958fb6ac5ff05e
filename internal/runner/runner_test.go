package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseOutput(t *testing.T) {
	cases := []struct {
		name    string
		out     string
		want    string
		wantErr string
	}{
		{"result", `{"type":"ready"}` + "\n" + `{"type":"progress","text":"tool: bash"}` + "\n" + `{"type":"result","text":"hi"}` + "\n", "hi", ""},
		{"empty result is an answer", `{"type":"ready"}` + "\n" + `{"type":"result"}` + "\n", "", ""},
		{"blank lines ignored", "\n" + `{"type":"result","text":"x"}` + "\n\n", "x", ""},
		{"error event", `{"type":"ready"}` + "\n" + `{"type":"error","error":"model call failed"}` + "\n", "", "model call failed"},
		{"no result", `{"type":"ready"}` + "\n", "", "without a result"},
		{"garbage is never an answer", `{"type":"ready"}` + "\nrm -rf /\n" + `{"type":"result","text":"x"}`, "", "not a JSON event"},
		{"unknown event type", `{"type":"shell","text":"x"}`, "", "unknown event type"},
		{"first result is the answer", `{"type":"result","text":"a"}` + "\n" + `{"type":"result","text":"b"}` + "\n", "a", ""},
		{"garbage after the result", `{"type":"result","text":"a"}` + "\nrm -rf /\n", "", "not a JSON event"},
		{"last line without newline", `{"type":"result","text":"x"}`, "x", ""},
		{"nothing at all", "", "", "without a result"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseOutput(strings.NewReader(c.out))
			if c.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestLastLine(t *testing.T) {
	assert.Equal(t, "no error output", lastLine("  \n"))
	assert.Equal(t, "boom", lastLine("a\nb\nboom\n"))
	assert.Len(t, lastLine(strings.Repeat("x", 1000)), 300)
}

// doctor's socket check makes a socket as a run does, wherever the data dir
// is, and leaves nothing behind.
func TestCheckSocket(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), strings.Repeat("deep-project-dir/", 8), "data")
	require.NoError(t, CheckSocket(dataDir, -1, -1))
	left, err := os.ReadDir(SocketsDir(dataDir))
	require.NoError(t, err)
	assert.Empty(t, left)
}
