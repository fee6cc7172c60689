#!/usr/bin/env bash
# Opt-in (issue 39): an arm64 libruby, cross-compiled on this x86-64 machine
# from the same Debian source package scripts/build-rubies.sh builds, for its
# DWARF: aarch64's layout tables are made from it (layouts/dwarf/aarch64/,
# then the line's aarch64 supplement; docs/layouts.md). Debian's own arm64
# ruby3.1 is stripped and its debug symbols are not in the archive this
# machine reaches, so an arm64 build of the same release is the next best
# source of aarch64's struct layouts; Debian's binary is what the tests run
# (under qemu-aarch64) and what the tables are validated against at attach.
#
# Only libruby.so is built, with Debian's -O2 and plain -g as
# build-rubies.sh builds (nothing runs it): Debian's cross compiler
# (gcc-aarch64-linux-gnu) against the arm64 build sysroot, both from
# scripts/install-arm64.sh --build (as cmake/toolchain-aarch64.cmake
# uses them), and the host's Ruby as BASERUBY for the files the build
# generates (miniruby, an arm64 program, cannot run here). Kept in $RBPEEK_ARM64_RUBIES (default
# /var/cache/rbpeek/arm64-rubies)/<version>/, stamped with its recipe like
# build-rubies.sh's builds.
#
# usage: build-arm64-ruby.sh [VERSION]   (3.1.2, the default: Debian's arm64 ruby3.1)
set -euo pipefail

CACHE=${RBPEEK_RUBIES:-/var/cache/rbpeek/rubies}
SRC=$CACHE/src
OUT=${RBPEEK_ARM64_RUBIES:-/var/cache/rbpeek/arm64-rubies}
BUILD_SYSROOT=${RBPEEK_ARM64_BUILD_SYSROOT:-/var/cache/rbpeek/arm64-build-sysroot}
BASERUBY=${RBPEEK_BASERUBY:-$(command -v ruby3.1 || command -v ruby || true)}
declare -A SPEC=([3.1.2]="ruby3.1 ruby3.1_3.1.2")

name=${1:-3.1.2}
spec=${SPEC[$name]:?no recipe for $name (known: ${!SPEC[*]})}
read -r pkg tarball <<<"$spec"
command -v aarch64-linux-gnu-gcc >/dev/null || { echo "needs aarch64-linux-gnu-gcc: scripts/install-arm64.sh --build" >&2; exit 1; }
[ -n "$BASERUBY" ] || { echo "needs a Ruby on this machine as BASERUBY (RBPEEK_BASERUBY)" >&2; exit 1; }
[ -f "$BUILD_SYSROOT/usr/include/stdio.h" ] || { echo "needs the arm64 build sysroot: scripts/install-arm64.sh --build" >&2; exit 1; }

prefix=$OUT/$name
lib=$prefix/libruby.so.$name
recipe="$pkg host=aarch64-linux-gnu $(aarch64-linux-gnu-gcc -dumpfullversion) optflags=-O2 -fno-fast-math debugflags=-g --enable-shared"
if [ -f "$lib" ] && [ "$(cat "$prefix/.rbpeek-complete" 2>/dev/null)" = "$recipe" ]; then
    echo "arm64 ruby $name: cached at $lib"; exit 0
fi
mkdir -p "$OUT" "$SRC"
(flock 9; ls "$SRC/$tarball".orig.tar.* >/dev/null 2>&1 || \
    (cd "$SRC" && apt-get source --download-only "$pkg" >/dev/null)) 9>"$SRC/.lock"
work=$(mktemp -d "$OUT/build-$name.XXXX")
tar -C "$work" -xf "$SRC/$tarball".orig.tar.* --strip-components=1
t0=$(date +%s)
echo "arm64 ruby $name: building libruby in $work (log: $work/build.log)"
(
    cd "$work" &&
    ./configure --build=x86_64-linux-gnu --host=aarch64-linux-gnu --enable-shared --disable-install-doc \
        --with-baseruby="$BASERUBY" optflags="-O2 -fno-fast-math" debugflags=-g \
        CC="aarch64-linux-gnu-gcc --sysroot=$BUILD_SYSROOT" &&
    make -j"${JOBS:-2}" "libruby.so.$name" &&
    times > "$work/cpu"
) > "$work/build.log" 2>&1 || { echo "arm64 ruby $name: build failed, see $work/build.log"; exit 1; }
rm -rf "$prefix"
mkdir -p "$prefix"
cp "$work/libruby.so.$name" "$lib"
echo "$recipe" > "$prefix/.rbpeek-complete"
echo "arm64 ruby $name: $lib in $(( $(date +%s) - t0 )) s (CPU user, system: $(sed -n 2p "$work/cpu"))"
rm -rf "$work"
