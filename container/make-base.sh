#!/bin/sh
# make-base.sh builds the agent image's base, clawpen-base:bookworm, without any
# container registry: debootstrap (variant minbase) creates a Debian bookworm
# rootfs from this machine's configured apt mirror, the assistant's userland is
# installed into it, apt lists and caches are removed, and the tree is
# `docker import`ed.
#
# Usage (as root, from anywhere):  container/make-base.sh [tag]
# Environment:
#   CLAWPEN_BASE_MIRROR  Debian mirror to use (default: read from /etc/apt/sources.list{,.d})
#   CLAWPEN_BASE_SUITE   default bookworm
#
# Needs: debootstrap (apt-get install -y debootstrap), docker, root.
# With registry access you do not need this script at all:
#   docker build -f container/Dockerfile --build-arg BASE=debian:bookworm-slim .
set -eu

TAG=${1:-clawpen-base:bookworm}
SUITE=${CLAWPEN_BASE_SUITE:-bookworm}
PACKAGES="bash,coreutils,git,curl,ca-certificates,python3,ripgrep,jq,findutils,grep,sed,procps,less,tzdata"

die() { echo "make-base: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap creates device nodes and chowns files)"
command -v debootstrap >/dev/null 2>&1 || die "debootstrap not found: apt-get install -y debootstrap"
command -v docker >/dev/null 2>&1 || die "docker CLI not found"

# mirror finds the first Debian main archive in the apt configuration, in either
# the one-line format (deb URL suite ...) or the deb822 format (URIs: URL).
mirror() {
	if [ -n "${CLAWPEN_BASE_MIRROR:-}" ]; then
		echo "$CLAWPEN_BASE_MIRROR"
		return
	fi
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk '
			/^[ \t]*#/ { next }
			$1 == "deb" { u = ($2 ~ /^\[/) ? $3 : $2; if (u !~ /security/) { print u; exit } }
			tolower($1) == "uris:" { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }
		' "$f"
	done | head -n 1
}

MIRROR=$(mirror)
[ -n "$MIRROR" ] || MIRROR=http://deb.debian.org/debian
echo "make-base: $SUITE from $MIRROR -> $TAG" >&2

ROOT=$(mktemp -d /tmp/clawpen-base.XXXXXX)
cleanup() {
	# debootstrap may leave /proc or /sys mounted on failure.
	for m in proc sys dev/pts dev; do umount -l "$ROOT/$m" 2>/dev/null || true; done
	rm -rf "$ROOT"
}
trap cleanup EXIT INT TERM

debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOT" "$MIRROR" >&2

# Small and reproducible: no package lists, caches, docs or logs.
chroot "$ROOT" apt-get clean
rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/* "$ROOT"/var/cache/debconf/*-old \
	"$ROOT"/var/log/* "$ROOT"/usr/share/doc/* "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/* \
	"$ROOT"/tmp/* "$ROOT"/root/.bash_history
# The image gets its resolv.conf and hostname from the engine.
: > "$ROOT/etc/resolv.conf"
echo clawpen > "$ROOT/etc/hostname"
# Keep the mirror so that BASE images can install more with apt later.
echo "deb $MIRROR $SUITE main" > "$ROOT/etc/apt/sources.list"

# Only PATH is set: every variable of the image reaches the agent, and the
# sandbox environment is meant to be the host's allowlist and nothing else.
tar --numeric-owner --xattrs -C "$ROOT" -c . |
	docker import \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'CMD ["/bin/bash"]' \
		--message "clawpen base: debootstrap $SUITE minbase + assistant userland" \
		- "$TAG" >/dev/null
echo "make-base: built $TAG" >&2
