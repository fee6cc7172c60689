#!/usr/bin/env bash
# The README's first command: installs what is missing, builds rbpeek, starts
# examples/demo.rb under Debian's Ruby, and shows `ruby bt -a` from gdb and
# from lldb-16 attached to it. The demo process is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null

pidfile=$(mktemp)
rm -f "$pidfile"
ruby3.1 examples/demo.rb "$pidfile" &
demo=$!
trap 'kill $demo 2>/dev/null || true; rm -f "$pidfile"' EXIT
for _ in $(seq 100); do [ -s "$pidfile" ] && break; sleep 0.1; done
sleep 0.5

echo "=== gdb -p $demo: ruby bt -a"
gdb -q -nx -batch -p "$demo" -ex "source gdb-plugin/rbpeek.py" -ex "ruby bt -a" 2>/dev/null \
    | sed -n '/^Thread [0-9]/,$p' | grep -v '^\[Inferior'
echo
echo "=== lldb-16 -p $demo: ruby bt -a"
lldb-16 --no-lldbinit -b -p "$demo" -o "command script import lldb-plugin/rbpeek.py" -o "ruby bt -a" 2>/dev/null \
    | sed -n '/^Thread [0-9]/,$p'
