#!/usr/bin/env bash
# Opt-in: what it.arch_refusal needs (issue 39), an arm64 Ruby run under
# emulation on this x86-64 machine. Not in install-deps.sh, for its size:
#   qemu-user        12 MB download,  99 MB installed (qemu-aarch64)
#   gdb-multiarch     4 MB download,  18 MB installed
#   an arm64 sysroot  9 MB of .debs,  59 MB unpacked: Debian's ruby3.1:arm64,
#                     libruby3.1:arm64 and what it loads (libc6, libcrypt1,
#                     libgmp10, zlib1g, libgcc-s1), in $RBPEEK_ARM64_SYSROOT
#                     (default /var/cache/rbpeek/arm64-sysroot)
# plus dpkg's arm64 architecture and its package lists (apt-get update).
# The sysroot is unpacked with dpkg -x, not installed: ruby3.1:arm64 cannot
# be installed beside the amd64 ruby3.1 the test matrix uses (Multi-Arch:
# allowed), and qemu-aarch64 -L SYSROOT runs it from there. Idempotent.
set -euo pipefail

SYSROOT=${RBPEEK_ARM64_SYSROOT:-/var/cache/rbpeek/arm64-sysroot}
DEBS=(ruby3.1:arm64 libruby3.1:arm64 libc6:arm64 libcrypt1:arm64 libgmp10:arm64 zlib1g:arm64 libgcc-s1:arm64)

missing=()
for p in qemu-user gdb-multiarch; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
updated=0
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
    apt-get update -qq
    updated=1
fi
if [ ${#missing[@]} -gt 0 ]; then
    [ $updated = 1 ] || { apt-get update -qq; updated=1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ! -x "$SYSROOT/usr/bin/ruby3.1" ]; then
    [ $updated = 1 ] || apt-get update -qq
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    (cd "$work" && apt-get download -qq -o APT::Sandbox::User=root "${DEBS[@]}")
    mkdir -p "$work/root"
    for d in "$work"/*.deb; do dpkg -x "$d" "$work/root"; done
    mkdir -p "$(dirname "$SYSROOT")"
    rm -rf "$SYSROOT"
    mv "$work/root" "$SYSROOT"
fi
qemu-aarch64 -L "$SYSROOT" "$SYSROOT/usr/bin/ruby3.1" --disable-gems -e 'puts "arm64 Ruby: " + RUBY_DESCRIPTION'
