#!/usr/bin/env bash
# Writes the statically linked busybox of Debian's (or Ubuntu's)
# busybox-static package to $1: the shell and tools of gantry's image.
# apt-get download needs no root and installs nothing.
set -euo pipefail
out=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v apt-get >/dev/null || { echo "get-busybox: needs apt-get (Debian or Ubuntu)" >&2; exit 1; }
(cd "$tmp" && apt-get download -q busybox-static >/dev/null)
dpkg-deb -x "$tmp"/busybox-static_*.deb "$tmp/root"
mkdir -p "$(dirname "$out")"
install -m 0755 "$tmp/root/bin/busybox" "$out"
