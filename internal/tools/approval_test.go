package tools

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

// Who waits for the owner, cell by cell: never (the default), groups
// (every group but main), always (main's agent too); the owner's own call
// never waits.
func TestNeedsApproval(t *testing.T) {
	base := "name: x\ndescription: x\ncommand: [/bin/true]\n"
	mainC := domain.Caller{Group: "main", IsMain: true}
	famC := domain.Caller{Group: "family"}
	owner := domain.Owner()
	for setting, want := range map[string][3]bool{
		"":                 {false, false, false},
		"approval: never":  {false, false, false},
		"approval: groups": {false, true, false},
		"approval: always": {true, true, false},
	} {
		tl := mustParse(t, base+setting)
		assert.Equal(t, want, [3]bool{tl.NeedsApproval(mainC), tl.NeedsApproval(famC), tl.NeedsApproval(owner)}, setting)
	}
	_, err := Parse("/t/x.md", def(base+"approval: sometimes"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "want never, groups or always")
}
