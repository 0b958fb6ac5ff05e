package mounts

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMatchBlocked(t *testing.T) {
	al := Allowlist{Blocked: []string{"Password", "secret"}}
	tests := []struct {
		name    string
		pattern string // "" = no match
	}{
		{".ssh", ".ssh"},
		{".SSH", ".ssh"},
		{"My.Ssh", ".ssh"},
		{".ssh_old", ".ssh"},
		{".env", ".env"},
		{".env.local", ".env"},
		{"prod.env", ".env"},
		{"credentials.json", "credentials"},
		{"CREDENTIALS", "credentials"},
		{"id_rsa.pub", "id_rsa"},
		{"my-passwords.txt", "password"},
		{"top-SECRET", "secret"},
		{".secrets", ".secret"},
		{"．ｓｓｈ", ".ssh"},               // fullwidth
		{"\u2024ssh", ".ssh"},          // one dot leader
		{".ѕѕһ", ".ssh"},               // Cyrillic dze, shha
		{"сredentials", "credentials"}, // Cyrillic es
		{".еnv", ".env"},               // Cyrillic ie
		{".ΕNV", ".env"},               // Greek capital epsilon
		{".s\u200bsh", ".ssh"},         // zero-width space
		{".s\u00adsh", ".ssh"},         // soft hyphen
		{".ss\u0301h", ".ssh"},         // combining mark
		{"ıd_rsa", "id_rsa"},           // dotless i
		{"\u212Aube", ""},              // Kelvin sign folds to k, but "kube" needs the dot
		{".\u212Aube", ".kube"},        // Kelvin sign
		{"src", ""},
		{"ssh", ""},
		{"env", ""},
		{"environment", ""},
		{"main.go", ""},
		{"kube", ""},
		{"id-rsa", ""},
		// The second list of built-ins.
		{"id_ecdsa", "id_ecdsa"},
		{"id_ecdsa.pub", "id_ecdsa"},
		{"id_dsa", "id_dsa"},
		{".pgpass", ".pgpass"},
		{".vault-token", ".vault-token"},
		{".git-credentials", "credentials"}, // the older, wider pattern comes first
		{".pypirc", ".pypirc"},
		{".s3cfg", ".s3cfg"},
		{"kubeconfig", "kubeconfig"},
		{"prod-kubeconfig.yaml", "kubeconfig"},
		// Extension patterns: the end of the name, or followed by another extension.
		{"server.key", "*.key"},
		{"SERVER.KEY", "*.key"},
		{"server.key.bak", "*.key"},
		{".key", "*.key"},
		{"tls.pem", "*.pem"},
		{"ca-cert.pem", "*.pem"}, // certificates too: the name cannot tell
		{"tls.pem.orig", "*.pem"},
		{"ｔｌｓ．ｐｅｍ", "*.pem"}, // fullwidth
		{"terraform.tfstate", "*.tfstate"},
		{"terraform.tfstate.backup", "*.tfstate"},
		{"my.keyboard", ""},
		{"monkey", ""},
		{"keys", ""},
		{"pem", ""},
		{"x.pembroke", ""},
		{"tfstate", ""},
		{"hosts.yml", ""}, // only under .config/gh
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := blockedTail([]string{fold(tt.name)}, al.patterns())
			if tt.pattern == "" {
				assert.False(t, ok, "matched %q", p)
				return
			}
			assert.True(t, ok)
			assert.Equal(t, tt.pattern, p)
		})
	}
}

func TestFoldIsASCIIForLookalikes(t *testing.T) {
	for r, a := range lookalike {
		assert.Less(t, a, rune(0x80), "lookalike %U maps to non-ASCII", r)
		assert.Equal(t, string(fold(string(a))), fold(string(r)), "%U", r)
	}
}

func TestBlockedMultiComponent(t *testing.T) {
	ps := Allowlist{Blocked: []string{"deploy/*.txt"}}.patterns()
	tests := []struct {
		path    string
		pattern string // "" = no match
	}{
		{"/home/u/.config/gh/hosts.yml", ".config/gh/hosts.yml"},
		{"/home/u/.CONFIG/gh/hosts.yml", ".config/gh/hosts.yml"},
		{"/home/u/.config/gh/hosts.yml/x", ".config/gh/hosts.yml"}, // below it
		{"/home/u/.config/gh", ""},
		{"/home/u/.config/gh/config.yml", ""},
		{"/home/u/gh/hosts.yml", ""},
		{"/home/u/.config/other/hosts.yml", ""},
		{"/home/u/.config/x/gh/hosts.yml", ""}, // consecutive components only
		{"/srv/deploy/notes.txt", "deploy/*.txt"},
		{"/srv/deploy/notes.md", ""},
		{"/srv/deploy", ""},
		{"/srv/other/notes.txt", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			_, p, ok := blockedComponent(tt.path, ps)
			if tt.pattern == "" {
				assert.False(t, ok, "matched %q", p)
				return
			}
			assert.True(t, ok)
			assert.Equal(t, tt.pattern, p)
		})
	}
}
