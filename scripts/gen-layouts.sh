#!/usr/bin/env bash
# Regenerates the DWARF-made reference tables, layouts/dwarf/<version>.layout,
# from the DWARF of every complete Ruby build in the cache ($RBPEEK_RUBIES, default
# /var/cache/rbpeek/rubies; see build-rubies.sh). Shared builds are read from
# lib/libruby.so.X.Y.Z, static ones from bin/ruby. Each table is named by the
# version the ruby itself reports. A static build of a version that also has
# a shared build is only a cross-check: identical tables are not kept twice;
# a difference is kept as <version>-static.layout and reported.
#
# The arm64 builds of scripts/build-arm64-ruby.sh (libruby alone, in
# $RBPEEK_ARM64_RUBIES, default /var/cache/rbpeek/arm64-rubies) give
# layouts/dwarf/aarch64/<version>.layout the same way, named by the
# version their recipe built (nothing arm64 runs here to ask it), and with
# a "machine aarch64" line, as rbpeek-layoutgen writes for another
# machine's DWARF.
#
# These tables are not compiled in: the built-in tables are made from public
# facts by tools/rbpeek-factsgen.py, which takes the members the facts leave
# opaque from these (--supplement-from) and must agree with them on the rest
# (tests/unit/layout/test_layout_tables.c).
#
# usage: gen-layouts.sh [build-name ...]     (default: every complete build)
# env:   RBPEEK_LAYOUTGEN  the rbpeek-layoutgen binary (default: build it in
#                          build-layoutgen/ of this checkout)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUBIES=${RBPEEK_RUBIES:-/var/cache/rbpeek/rubies}
ARM64_RUBIES=${RBPEEK_ARM64_RUBIES:-/var/cache/rbpeek/arm64-rubies}
OUT=$ROOT/layouts/dwarf
mkdir -p "$OUT"

GEN=${RBPEEK_LAYOUTGEN:-}
if [ -z "$GEN" ]; then
    cmake -S "$ROOT" -B "$ROOT/build-layoutgen" >/dev/null
    cmake --build "$ROOT/build-layoutgen" --target rbpeek-layoutgen -j"$(nproc)" >/dev/null
    GEN=$ROOT/build-layoutgen/bin/rbpeek-layoutgen
fi

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for d in "$RUBIES"/*/; do
        d=${d%/}
        [ -f "$d/.rbpeek-complete" ] && names+=("$(basename "$d")")
    done
fi
# Shared builds first, so a static twin is compared with the fresh table.
mapfile -t names < <(printf '%s\n' "${names[@]}" | awk '{print (/-static$/ ? 1 : 0) "\t" $0}' | sort | cut -f2)

# The fields of a layout file, without comments: what a comparison cares about.
fields() { grep -v '^#' "$1"; }

status=0
for name in "${names[@]}"; do
    [ -n "$name" ] || continue
    prefix=$RUBIES/$name
    if [ ! -f "$prefix/.rbpeek-complete" ]; then
        echo "skip $name: not a complete build ($prefix)" >&2
        continue
    fi
    elf=$(ls "$prefix"/lib/libruby.so.*.*.* 2>/dev/null | head -n1 || true)
    [ -n "$elf" ] || elf=$prefix/bin/ruby
    version=$("$prefix/bin/ruby" -e 'print RUBY_VERSION')
    tmp=$(mktemp)
    if ! "$GEN" -v "$elf" --ruby-version "$version" -o "$tmp"; then
        echo "FAILED $name ($elf)" >&2
        rm -f "$tmp"
        status=1
        continue
    fi
    dest=$OUT/$version.layout
    if [[ $name == *-static && -f $dest ]]; then
        if diff <(fields "$dest") <(fields "$tmp") >/dev/null; then
            echo "$name: same layout as the shared build of $version; not kept"
            rm -f "$tmp"
            continue
        fi
        echo "$name: layout DIFFERS from the shared build of $version:" >&2
        diff <(fields "$dest") <(fields "$tmp") >&2 || true
        dest=$OUT/$version-static.layout
    fi
    mv "$tmp" "$dest"
    chmod 644 "$dest"
    echo "$name: wrote ${dest#"$ROOT"/} ($(fields "$dest" | grep -vc '^ruby ') fields)"
done
# The arm64 builds (every one, when no names were given)
if [ $# -eq 0 ]; then
    for lib in "$ARM64_RUBIES"/*/libruby.so.*; do
        [ -f "$lib" ] && [ -f "$(dirname "$lib")/.rbpeek-complete" ] || continue
        version=$(basename "$(dirname "$lib")")
        mkdir -p "$OUT/aarch64"
        dest=$OUT/aarch64/$version.layout
        if "$GEN" -v "$lib" --ruby-version "$version" -o "$dest"; then
            chmod 644 "$dest"
            echo "arm64 $version: wrote ${dest#"$ROOT"/} ($(fields "$dest" | grep -vc '^ruby \|^machine ') fields)"
        else
            echo "FAILED arm64 $version ($lib)" >&2
            status=1
        fi
    done
fi
exit $status
