package mounts

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

func TestCheckAndFormat(t *testing.T) {
	tr := newTree(t)
	al := tr.load(t, sampleJSON)
	reqs := []domain.MountRequest{
		{HostPath: "~/projects/app", ContainerPath: "app", ReadOnly: false},
		{HostPath: "~/notes", ContainerPath: "notes", ReadOnly: false},
		{HostPath: "~/projects/app/.env", ContainerPath: "env", ReadOnly: true},
		{HostPath: "~/projects2", ContainerPath: "other", ReadOnly: true},
		{HostPath: "~/projects/app/link-out", ContainerPath: "escape", ReadOnly: true},
		{HostPath: "~/projects/app/src", ContainerPath: "app", ReadOnly: true},
		{HostPath: "~/projects/app/src", ContainerPath: "../x", ReadOnly: true},
		{HostPath: "~/projects/app\nforged\tline", ContainerPath: "n", ReadOnly: true},
	}
	ds := Check(al, reqs, true)
	require.Len(t, ds, len(reqs))
	rules := make([]string, len(ds))
	for i, d := range ds {
		var r *Refusal
		if errors.As(d.Err, &r) {
			rules[i] = r.Rule
		}
		assert.Equal(t, reqs[i], d.Request)
	}
	assert.Equal(t, []string{"", "", RuleBlocked, RuleOutsideRoots, RuleOutsideRoots, RuleDuplicateName, RuleContainerPath, RuleNotFound}, rules)
	assert.NoError(t, ds[0].Err)
	assert.False(t, ds[0].Mount.ReadOnly)
	assert.True(t, ds[1].Mount.ReadOnly)

	// Print stable paths: the temp dir becomes /srv before formatting.
	for i := range ds {
		ds[i].Mount.HostPath = strings.ReplaceAll(ds[i].Mount.HostPath, tr.base, "/srv")
		var r *Refusal
		if errors.As(ds[i].Err, &r) {
			r.Reason = strings.ReplaceAll(r.Reason, tr.base, "/srv")
		}
	}
	var buf bytes.Buffer
	require.NoError(t, FormatDecisions(&buf, "main", ds))
	out := buf.String()
	t.Log("\n" + out)
	want := `group main
CONTAINER  HOST PATH                       DECISION  REASON
app        /srv/home/projects/app          allow rw
notes      /srv/home/notes                 allow ro  read-only: root ~/notes does not allow read-write
env        ~/projects/app/.env             REFUSED   blocked-pattern: path component ".env" matches blocked pattern ".env"
other      ~/projects2                     REFUSED   outside-roots: resolves to /srv/home/projects2 which is outside every allowed root
escape     ~/projects/app/link-out         REFUSED   outside-roots: resolves to /srv/outside which is outside every allowed root
app        ~/projects/app/src              REFUSED   duplicate-name: containerPath "app" is used by an earlier mount
../x       ~/projects/app/src              REFUSED   container-path: containerPath "../x" must be a plain name (no "..")
n          "~/projects/app\nforged\tline"  REFUSED   not-found: does not exist
`
	assert.Equal(t, want, out)
	assert.Equal(t, 10, strings.Count(out, "\n"), "a hostile path cannot add rows")
}

func TestCheckEmpty(t *testing.T) {
	assert.Empty(t, Check(Allowlist{}, nil, true))
	var buf bytes.Buffer
	require.NoError(t, FormatDecisions(&buf, "x\ny", nil))
	assert.Equal(t, "group \"x\\ny\"\nCONTAINER  HOST PATH  DECISION  REASON\n", buf.String())
}
