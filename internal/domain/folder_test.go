package domain

import (
	"regexp"
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

// FuzzFolderSlugIsThePattern holds the written-out check to the pattern it
// replaces, on the seeds and whatever the fuzzer makes of them.
func FuzzFolderSlugIsThePattern(f *testing.F) {
	pattern := regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	for _, s := range []string{"", "a", "main", "a-", "-a", "a_b", "A", "a\n", "ab\x00", "z9", "0", "a.b", "é",
		"a234567890123456789012345678901234567890123456789012345678901234",
		"a23456789012345678901234567890123456789012345678901234567890123"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isFolderSlug(s), pattern.MatchString(s); got != want {
			t.Fatalf("isFolderSlug(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}
