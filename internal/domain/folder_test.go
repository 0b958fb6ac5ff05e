package domain

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestValidateFolder(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"family", true},
		{"team-2", true},
		{"a_b", true},
		{"0day", true},
		{"main", false},   // reserved: the owner's chat
		{"global", false}, // reserved: shared memory
		{"", false},
		{"Family", false},
		{"../x", false},
		{"a/b", false},
		{".hidden", false},
		{"-dash", false},
		{"_under", false},
		{"a b", false},
		{"fámily", false},
		{"x\x00", false},
		{"a234567890123456789012345678901234567890123456789012345678901234", false}, // 64 chars
		{"a23456789012345678901234567890123456789012345678901234567890123", true},   // 63 chars
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateFolder(c.name)
			if c.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}
