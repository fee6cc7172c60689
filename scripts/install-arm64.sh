#!/usr/bin/env bash
# What it.arch_read needs (issue 39), an arm64 Ruby run under emulation on
# this x86-64 machine; with --build, also what the aarch64 build of rbpeek
# needs (scripts/build-arm64.sh). scripts/test.sh runs it with --build; it
# is apart from install-deps.sh, which a user building rbpeek runs, for its
# size:
#   qemu-user        12 MB download,  99 MB installed (qemu-aarch64)
#   gdb-multiarch     4 MB download,  18 MB installed
#   an arm64 sysroot  9 MB of .debs,  59 MB unpacked: Debian's ruby3.1:arm64,
#                     libruby3.1:arm64 and what it loads (libc6, libcrypt1,
#                     libgmp10, zlib1g, libgcc-s1), in $RBPEEK_ARM64_SYSROOT
#                     (default /var/cache/rbpeek/arm64-sysroot)
# plus dpkg's arm64 architecture and its package lists (apt-get update).
# The sysroot is unpacked with dpkg -x, not installed: ruby3.1:arm64 cannot
# be installed beside the amd64 ruby3.1 the test matrix uses (Multi-Arch:
# allowed), and qemu-aarch64 -L SYSROOT runs it from there.
#
# --build adds:
#   gcc-aarch64-linux-gnu   41 MB download, 152 MB installed (21 packages:
#                           binutils, libc6-dev-arm64-cross and the sanitizers' runtimes)
#   a build sysroot         11 MB of .debs (23), 55 MB unpacked: the arm64 -dev packages
#                           cmake/toolchain-aarch64.cmake compiles and links
#                           against (libc6-dev, libelf-dev, libdw-dev,
#                           libdwarf-dev, libprotobuf-c-dev, zlib1g-dev,
#                           libgmp-dev, libcunit1-dev) and the libraries they
#                           load, in $RBPEEK_ARM64_BUILD_SYSROOT (default
#                           /var/cache/rbpeek/arm64-build-sysroot); the same
#                           tree is qemu-aarch64's -L when the unit tests run.
# It is unpacked with dpkg -x too: installing libc6-dev:arm64 and the rest
# through multiarch would change the host's package set (a -dev:arm64 must
# match its amd64 twin's version, and an upgrade of one then holds the other).
# Idempotent: each part is skipped when it is there.
set -euo pipefail

BUILD=0
case "${1:-}" in
    --build) BUILD=1 ;;
    "") ;;
    *) echo "usage: $0 [--build]" >&2; exit 2 ;;
esac

SYSROOT=${RBPEEK_ARM64_SYSROOT:-/var/cache/rbpeek/arm64-sysroot}
DEBS=(ruby3.1:arm64 libruby3.1:arm64 libc6:arm64 libcrypt1:arm64 libgmp10:arm64 zlib1g:arm64 libgcc-s1:arm64)
BUILD_SYSROOT=${RBPEEK_ARM64_BUILD_SYSROOT:-/var/cache/rbpeek/arm64-build-sysroot}
# Listed by hand, each with what needs it: dpkg -x follows no dependencies.
BUILD_DEBS=(libc6 libc6-dev linux-libc-dev libcrypt1 libcrypt-dev libgcc-s1   # the C library
            libelf1 libelf-dev zlib1g zlib1g-dev                              # libelf (and its zlib)
            libdw1 libdw-dev liblzma5 liblzma-dev libbz2-1.0                  # libdw (libdw.pc names liblzma)
            libdwarf1 libdwarf-dev libprotobuf-c1 libprotobuf-c-dev           # layout/, output/pprof.c
            libgmp10 libgmp-dev libcunit1 libcunit1-dev)                      # inspect_num.c, the unit tests
BUILD_DEBS=("${BUILD_DEBS[@]/%/:arm64}")

missing=()
wanted=(qemu-user gdb-multiarch)
[ $BUILD = 0 ] || wanted+=(gcc-aarch64-linux-gnu)
for p in "${wanted[@]}"; do
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
# dpkg_db ROOT FINAL DEB...: a dpkg database in ROOT/var/lib/dpkg that
# records the packages as installed at FINAL (each file's path under it),
# with their shlibs and symbols files: dpkg-shlibdeps, told DPKG_ADMINDIR
# and DEB_HOST_ARCH, then finds which package a library of the sysroot
# comes from and what to depend on (the arm64 .deb's Depends,
# cmake/Package.cmake). Only dpkg-query reads it; dpkg never installs there.
dpkg_db() {
    local root=$1 final=$2; shift 2
    local db=$root/var/lib/dpkg d name ctl
    mkdir -p "$db/info" "$db/updates"
    printf 'amd64\narm64\n' > "$db/arch"
    echo 1 > "$db/info/format"   # info files named pkg:arch (dpkg 1.16.2 on)
    : > "$db/status"
    for d in "$@"; do
        ctl=$(mktemp -d)
        dpkg-deb -e "$d" "$ctl"
        name=$(dpkg-deb -f "$d" Package)   # dpkg's file names: pkg:arch for Multi-Arch: same
        [ "$(dpkg-deb -f "$d" Multi-Arch)" != same ] || name+=":$(dpkg-deb -f "$d" Architecture)"
        for f in shlibs symbols; do [ ! -f "$ctl/$f" ] || cp "$ctl/$f" "$db/info/$name.$f"; done
        dpkg-deb --fsys-tarfile "$d" | tar -t | sed -e 's|^\./|/|' -e 's|/$||' | grep -v '^/\?\.\?$' |
            sed "s|^|$final|" > "$db/info/$name.list"
        { sed -n 1p "$ctl/control"; echo "Status: install ok installed"; sed 1d "$ctl/control"; echo; } >> "$db/status"
        rm -rf "$ctl"
    done
}
# unpack DIR DEB...: the packages' files in DIR (replaced whole, so that a
# half-made tree is never taken for a finished one), and their dpkg_db.
unpack() {
    local dir=$1; shift
    [ $updated = 1 ] || { apt-get update -qq; updated=1; }
    local work
    work=$(mktemp -d)
    (cd "$work" && apt-get download -qq -o APT::Sandbox::User=root "$@")
    mkdir -p "$work/root"
    for d in "$work"/*.deb; do dpkg -x "$d" "$work/root"; done
    # An absolute link (usr/lib/aarch64-linux-gnu/libz.so ->
    # /lib/aarch64-linux-gnu/libz.so.1.2.13) would name the host's file,
    # which is not there: the linker then takes libz.a. Made relative, it
    # stays inside the tree.
    local l
    find "$work/root" -type l -lname '/*' | while IFS= read -r l; do
        ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$work/root$(readlink "$l")")" "$l"
    done
    dpkg_db "$work/root" "$dir" "$work"/*.deb
    printf '%s\n' "$@" > "$work/root/.rbpeek-packages"
    mkdir -p "$(dirname "$dir")"
    rm -rf "$dir"
    mv "$work/root" "$dir"
    rm -rf "$work"
}
[ -x "$SYSROOT/usr/bin/ruby3.1" ] || unpack "$SYSROOT" "${DEBS[@]}"
# The build sysroot again when the list above changed.
if [ $BUILD = 1 ] && { [ ! -f "$BUILD_SYSROOT/var/lib/dpkg/status" ] ||
                       [ "$(cat "$BUILD_SYSROOT/.rbpeek-packages")" != "$(printf '%s\n' "${BUILD_DEBS[@]}")" ]; }; then
    unpack "$BUILD_SYSROOT" "${BUILD_DEBS[@]}"
fi
[ $BUILD = 0 ] || aarch64-linux-gnu-gcc --version | head -1
qemu-aarch64 -L "$SYSROOT" "$SYSROOT/usr/bin/ruby3.1" --disable-gems -e 'puts "arm64 Ruby: " + RUBY_DESCRIPTION'
