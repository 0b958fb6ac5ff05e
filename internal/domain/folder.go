package domain

import "fmt"

// isFolderSlug reports whether name matches ^[a-z0-9][a-z0-9_-]{0,62}$.
// Written out rather than a regexp: that one's {0,62} compiles to 62 nested
// states at package init, and clawpen-agent, which links this package and
// never validates a folder, paid it (a third of a millisecond) on every message.
func isFolderSlug(name string) bool {
	if len(name) == 0 || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '-' || c == '_') && i > 0:
		default:
			return false
		}
	}
	return true
}

// ValidateFolder checks that name is a safe slug for a group folder that a
// user may register: lowercase ASCII letters, digits, '-' and '_', at most 63
// characters, not starting with a separator, and not a reserved name.
func ValidateFolder(name string) error {
	if !isFolderSlug(name) {
		return fmt.Errorf("invalid folder %q: use 1-63 of a-z, 0-9, '-', '_', starting with a letter or digit", name)
	}
	if name == MainFolder || name == GlobalFolder {
		return fmt.Errorf("invalid folder %q: the name is reserved", name)
	}
	return nil
}
