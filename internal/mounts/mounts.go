// Package mounts decides which extra host folders a group may see in its
// sandbox (DESIGN.md, "Mount allowlist"). It is pure policy plus filesystem
// inspection: it resolves paths and answers allow/refuse, and lists what must
// be masked inside an allowed tree; Policy (policy.go) holds the allowlist as
// it is now, for every run. Binding is the sandbox backends' job.
//
// Decisions where DESIGN.md is silent:
//   - Blocked patterns match a path component case-insensitively when the
//     component CONTAINS the pattern, after folding Unicode look-alikes;
//     "*.ext" patterns match an extension and "a/b" patterns a run of
//     components (see match.go). They are checked on the path as written
//     and as resolved.
//   - A regular file may be mounted as well as a directory; sockets, devices
//     and fifos are refused (a docker.sock inside a root is no way out), and
//     Masks hides them inside mounted trees.
//   - "~user/…" is refused; only "~" and "~/…" expand (to the given home).
//   - nonMainReadOnly defaults to true when the file omits it. A requested
//     read-write mount that may not be read-write is granted read-only, not
//     refused. With nested roots the deepest root decides read-write.
//   - Protected paths keep mounts away from the allowlist file, ~/.config,
//     $HOME itself and its parents (Load adds these), the data dir and the
//     clawpen project (the caller adds them with Allowlist.Protect); see
//     ProtectMode. Main may mount a tree containing the data dir (the
//     project): the data dir is then masked.
//   - Keys in the file are matched exactly (encoding/json alone would accept
//     "nonMainReadonly"); an empty or "/"-holding pattern is malformed.
//   - Two mounts of one group may not share a containerPath (Check).
//   - A host in a container confines mounts to the tree it shares with the
//     Docker engine (Confine); a path elsewhere is refused, never handed to
//     the engine, which would bind whatever the Docker host has there.
//
// Validate is cheap (a few lstat/readlink calls, see BenchmarkValidate), so
// callers re-run it right before every invocation rather than trusting an
// earlier answer. A small race remains between Validate and the bind itself
// (a writable mount could swap a directory for a symlink); closing it —
// opening the resolved path with O_PATH|O_NOFOLLOW and binding the
// descriptor — is the backends' job.
package mounts

import (
	"errors"
	"fmt"
)

// ErrNoAllowlist is returned by Load when the allowlist file does not exist:
// no extra mounts are granted.
var ErrNoAllowlist = errors.New("no mount allowlist")

// DefaultBlocked are the built-in blocked patterns; they always apply in
// addition to the file's blockedPatterns (see match.go for the syntax).
// "*.pem" is blocked whole: the name cannot tell a private key from a
// certificate, and the stricter reading wins.
var DefaultBlocked = []string{
	".ssh", ".gnupg", ".aws", ".azure", ".gcloud", ".kube", ".docker",
	"credentials", ".env", ".netrc", ".npmrc", "id_rsa", "id_ed25519",
	"private_key", ".secret",
	"id_ecdsa", "id_dsa", ".pgpass", "*.key", "*.pem", ".vault-token",
	".git-credentials", ".pypirc", ".s3cfg", "kubeconfig", "*.tfstate",
	".config/gh/hosts.yml",
}

// Rules, as carried by Refusal.Rule, so callers can audit-log them.
const (
	RuleNoRoots       = "no-allowed-roots" // the allowlist grants nothing
	RuleHostPath      = "host-path"        // empty, relative, ~user, NUL
	RuleNotFound      = "not-found"        // missing, or a symlink could not be resolved
	RuleFileType      = "file-type"        // not a directory or regular file (socket, device, fifo)
	RuleOutsideRoots  = "outside-roots"    // resolved path under no allowed root
	RuleBlocked       = "blocked-pattern"  // a path component matches a blocked pattern
	RuleProtected     = "protected"        // the data dir, the allowlist, $HOME, the project …
	RuleContainerPath = "container-path"   // containerPath is not a plain name
	RuleDuplicateName = "duplicate-name"   // two mounts of one group under the same name
	RuleNotBindable   = "not-bindable"     // outside the only tree the sandbox engine can bind (Confine)
)

// Refusal is why a mount request was refused. Path is the host path as the
// group requested it.
type Refusal struct {
	Rule   string
	Path   string
	Reason string
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("mount %q: %s", r.Path, r.Reason)
}

func refuse(rule, path, format string, args ...any) *Refusal {
	return &Refusal{Rule: rule, Path: path, Reason: fmt.Sprintf(format, args...)}
}

// Root is an allowed root from the allowlist file.
type Root struct {
	Path           string // as written in the file
	Resolved       string // absolute, ~ expanded, every symlink resolved
	AllowReadWrite bool
	Description    string
}

// ProtectMode says how a protected path limits mounts.
type ProtectMode int

const (
	// ProtectAll: nobody may mount the path or anything inside it. A mount
	// containing it is refused for non-main; for main the path is masked
	// (the data dir inside the project the owner mounts into main).
	ProtectAll ProtectMode = iota
	// ProtectNonMain: non-main may not mount the path, anything inside it,
	// or anything containing it; main may (the clawpen project, .env masked).
	ProtectNonMain
	// ProtectContaining: nobody may mount the path itself or anything
	// containing it; paths inside it are fine (the home directory).
	ProtectContaining
)

// Protected is a host path that mounts must keep away from, whatever the
// allowed roots say.
type Protected struct {
	Path string // absolute; resolved again at each Validate, so it may not exist yet
	What string // for messages: "the data dir"
	Mode ProtectMode
}

// Allowlist is a loaded, validated allowlist file plus the host's protected
// paths. The zero value grants nothing.
type Allowlist struct {
	Roots           []Root
	Blocked         []string // the file's patterns; DefaultBlocked always applies too
	NonMainReadOnly bool     // default true when the file omits it
	Home            string   // for ~ expansion in requests
	Protected       []Protected
	// Bindable, when set, is the only tree mounts may come from: the engine
	// of a host in a container sees nothing else of the host's (Confine).
	Bindable, BindableWhat string
}

// Confine refuses every mount that does not resolve inside dir; what says
// why, for messages. A relative dir is refused, as in Protect.
func (a *Allowlist) Confine(dir, what string) error {
	if dir == "" || !isAbs(dir) {
		return fmt.Errorf("confine mounts to %s: path %q is not absolute", what, dir)
	}
	a.Bindable, a.BindableWhat = dir, what
	return nil
}

// Protect adds a protected path (the data dir, the project dir). A relative
// path is refused so that the check cannot silently depend on the cwd.
func (a *Allowlist) Protect(path, what string, mode ProtectMode) error {
	if path == "" || !isAbs(path) {
		return fmt.Errorf("protect %s: path %q is not absolute", what, path)
	}
	a.Protected = append(a.Protected, Protected{Path: path, What: what, Mode: mode})
	return nil
}
