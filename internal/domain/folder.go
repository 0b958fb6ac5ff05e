package domain

import (
	"fmt"
	"regexp"
)

var folderPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidateFolder checks that name is a safe slug for a group folder that a
// user may register: lowercase ASCII letters, digits, '-' and '_', at most 63
// characters, not starting with a separator, and not a reserved name.
func ValidateFolder(name string) error {
	if !folderPattern.MatchString(name) {
		return fmt.Errorf("invalid folder %q: use 1-63 of a-z, 0-9, '-', '_', starting with a letter or digit", name)
	}
	if name == MainFolder || name == GlobalFolder {
		return fmt.Errorf("invalid folder %q: the name is reserved", name)
	}
	return nil
}
