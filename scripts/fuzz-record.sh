#!/usr/bin/env bash
# Makes a memory image the fuzz harnesses replay, tests/fuzz/data/
# rubyX.Y.img.gz: runs tests/fuzz/image_target.rb under a Ruby (RUBY,
# default Debian's ruby3.1; X.Y is its version), gcores it, and records
# with record_image the pages rbpeek's readers touch on that core (every
# heap page; see tests/fuzz/README.md).
#   bash scripts/fuzz-record.sh [BUILD_DIR]   (default build; needs gdb, ruby3.1)
#   RUBY=/var/cache/rbpeek/rubies/3.4.5/bin/ruby bash scripts/fuzz-record.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
RUBY=${RUBY:-/usr/bin/ruby3.1}
OUT=tests/fuzz/data/ruby$("$RUBY" -e 'print RUBY_VERSION[/\A\d+\.\d+/]').img.gz
cmake -S . -B "$BUILD" -DRBPEEK_FUZZ_TOOLS=ON >/dev/null   # record_image is built on request only
cmake --build "$BUILD" --target record_image >/dev/null
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
"$RUBY" tests/fuzz/image_target.rb "$work" &
pid=$!
for _ in $(seq 300); do [ -f "$work/ready" ] && break; sleep 0.1; done
[ -f "$work/ready" ] || { echo "fuzz-record: the target did not park" >&2; exit 1; }
gcore -o "$work/core" "$pid" >/dev/null 2>&1
"$BUILD/bin/record_image" "$work/core.$pid" "$OUT" "${HEAP_PAGES:-100000}"
ls -l "$OUT"
