#!/usr/bin/env bash
# Makes the memory image the fuzz harnesses replay, tests/fuzz/data/
# ruby3.1.img.gz: runs tests/fuzz/image_target.rb under Debian's ruby3.1,
# gcores it, and records with record_image the pages rbpeek's readers
# touch on that core (every heap page; see tests/fuzz/README.md).
#   bash scripts/fuzz-record.sh [BUILD_DIR]   (default build; needs gdb, ruby3.1)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
RUBY=${RUBY:-/usr/bin/ruby3.1}
cmake --build "$BUILD" --target record_image >/dev/null
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
"$RUBY" tests/fuzz/image_target.rb "$work" &
pid=$!
for _ in $(seq 300); do [ -f "$work/ready" ] && break; sleep 0.1; done
[ -f "$work/ready" ] || { echo "fuzz-record: the target did not park" >&2; exit 1; }
gcore -o "$work/core" "$pid" >/dev/null 2>&1
"$BUILD/bin/record_image" "$work/core.$pid" tests/fuzz/data/ruby3.1.img.gz "${HEAP_PAGES:-100000}"
ls -l tests/fuzz/data/ruby3.1.img.gz
