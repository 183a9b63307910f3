#!/usr/bin/env bash
# Build the tetherbed/base root filesystem as a tarball, without any registry.
#
#   mkrootfs.sh OUTPUT.tar CACHE_DIR
#
# debootstrap makes a minbase Debian bookworm; apt inside a chroot then adds
# packages.txt from bookworm, bookworm-updates and bookworm-security, so the
# image gets the same security fixes a pulled debian:bookworm would. The .deb
# files are kept in CACHE_DIR, so a rebuild (after packages.txt changes)
# downloads only what is new. build_images.py calls this and `docker import`s
# the result; run it alone only to debug the root filesystem.
#
# Needs root (debootstrap, chroot, mount). Environment:
#   TETHERBED_DEBIAN_MIRROR    default http://deb.debian.org/debian
#   TETHERBED_SECURITY_MIRROR  default http://deb.debian.org/debian-security
set -euo pipefail

if [[ $# -ne 2 ]]; then
    echo "usage: $0 OUTPUT.tar CACHE_DIR" >&2
    exit 2
fi
output=$(realpath -m "$1")
cache=$(realpath -m "$2")
here=$(cd "$(dirname "$0")" && pwd)
mirror=${TETHERBED_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${TETHERBED_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
suite=bookworm

fail() {
    echo "mkrootfs: $*" >&2
    exit 1
}

[[ $(id -u) == 0 ]] || fail "must run as root (debootstrap and chroot need it)"
command -v debootstrap >/dev/null || fail "debootstrap is not installed (apt-get install debootstrap)"

# Comments and blank lines are allowed in packages.txt.
mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$here/packages.txt" | grep -v '^$')
[[ ${#packages[@]} -gt 0 ]] || fail "no packages listed in $here/packages.txt"

mkdir -p "$cache/debootstrap" "$cache/apt-archives/partial" "$(dirname "$output")"
root=$(mktemp -d "$cache/rootfs.XXXXXX")

# Whatever happens, unmount what we mounted inside the chroot before removing
# it: `rm -rf` through a live /proc or bind mount would be a disaster.
cleanup() {
    for mount in "$root/var/cache/apt/archives" "$root/dev/pts" "$root/dev" "$root/proc"; do
        if mountpoint -q "$mount" 2>/dev/null; then
            umount -l "$mount" || true
        fi
    done
    rm -rf --one-file-system "$root"
    rm -f "$output.tmp"
}
trap cleanup EXIT

echo "mkrootfs: debootstrap --variant=minbase $suite ($mirror)"
debootstrap --variant=minbase --cache-dir="$cache/debootstrap" "$suite" "$root" "$mirror" \
    >"$cache/debootstrap.log" 2>&1 || {
    tail -n 30 "$cache/debootstrap.log" >&2
    fail "debootstrap failed (log: $cache/debootstrap.log)"
}

# All three suites, so `apt-get upgrade` below brings in security fixes.
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF

# Keep the image small: no docs, man pages or translations (copyright files
# stay, as Debian's licences ask).
cat >"$root/etc/dpkg/dpkg.cfg.d/01-tetherbed-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
EOF
# No recommends: the list above is meant to be the whole story.
cat >"$root/etc/apt/apt.conf.d/01-tetherbed" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
EOF
# Packages must not try to start services inside the chroot.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$root/etc/resolv.conf"

mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
mount --bind "$cache/apt-archives" "$root/var/cache/apt/archives"

in_root() {
    chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
        LANG=C.UTF-8 "$@"
}

echo "mkrootfs: apt-get install ${#packages[@]} packages (${packages[*]})"
{
    in_root apt-get update -q &&
        in_root apt-get -y -q upgrade &&
        in_root apt-get -y -q install "${packages[@]}" &&
        in_root apt-get -y -q autoremove --purge
} >"$cache/apt.log" 2>&1 || {
    tail -n 30 "$cache/apt.log" >&2
    fail "apt-get in the chroot failed (log: $cache/apt.log)"
}

# Leave no build-time state behind: package lists (stale by next week),
# our policy-rc.d, the host's resolver config (Docker provides its own), logs.
umount "$root/var/cache/apt/archives" "$root/dev/pts" "$root/dev" "$root/proc"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/*.log \
    "$root"/var/log/apt/* "$root/usr/sbin/policy-rc.d" "$root/etc/resolv.conf" "$root"/tmp/*
# An empty machine-id: each container is a different machine.
: >"$root/etc/machine-id"

# Numeric owners: the image must not depend on the host's user database.
tar --numeric-owner --xattrs -C "$root" -cf "$output.tmp" .
mv "$output.tmp" "$output"
echo "mkrootfs: wrote $output ($(du -h "$output" | cut -f1))"
