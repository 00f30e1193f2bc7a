#!/bin/sh
# fetch-kernel.sh DIR: Debian's cloud kernel for the power-cut test
# (crates/cairn/tests/powercut.rs), unpacked into DIR: DIR/vmlinuz and
# DIR/lib/modules/<version>/. Does nothing when DIR/vmlinuz is there.
# Needs apt-get with current package lists (`apt-get update`) and dpkg-deb;
# no root: `apt-get download` only fetches the .deb.
set -eu
dest=${1:?usage: fetch-kernel.sh DIR}
[ -f "$dest/vmlinuz" ] && exit 0

# The meta-package names the current kernel; take that one.
pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
    awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
if [ -z "$pkg" ]; then
    echo "fetch-kernel.sh: apt knows no linux-image-cloud-amd64 (run apt-get update?)" >&2
    exit 1
fi

mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$dest.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -q "$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true)
deb=$(ls "$tmp"/*.deb 2>/dev/null | head -n 1)
if [ -z "$deb" ]; then
    echo "fetch-kernel.sh: apt-get download $pkg fetched nothing" >&2
    exit 1
fi
dpkg-deb -x "$deb" "$tmp/root"
cp "$tmp"/root/boot/vmlinuz-* "$tmp/root/vmlinuz"
echo "$pkg" >"$tmp/root/package"
# Whole or not at all: a concurrent or interrupted run never sees half.
mv -T "$tmp/root" "$dest" 2>/dev/null || [ -f "$dest/vmlinuz" ]
echo "fetch-kernel.sh: $pkg unpacked in $dest" >&2
