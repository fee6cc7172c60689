#!/usr/bin/env bash
# The README's test command, and what CI runs (.ci/run): installs what is
# missing, builds the CRuby test matrix (cached outside the checkout, so only
# the first run pays for it), builds rbpeek, and runs every test with ctest;
# then builds rbpeek for aarch64 and runs its unit tests under qemu.
# Extra arguments go to ctest (e.g. -L unit, -R it.bt.3.4.5), and leave the
# aarch64 build out.
#
# At the end, also when a phase fails, it prints the suite's budget: the wall
# time of each phase and ctest's label summary (seconds x processes per
# suite). docs/test-budget.md says what the budget is and records a fresh run.
set -euo pipefail
cd "$(dirname "$0")/.."
ctest_log=build/ctest-output.log
done_phases=()
phase_name=
phase_start=0

# phase NAME COMMAND...: runs the command and keeps its wall time.
phase() {
  phase_name=$1
  phase_start=$SECONDS
  shift
  "$@"
  done_phases+=("$(printf '%-14s %6d s' "$phase_name" $((SECONDS - phase_start)))")
  phase_name=
}

budget() {
  local rc=$?
  echo
  echo "== Time of each phase (wall clock; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg) now)"
  local p
  for p in "${done_phases[@]}"; do
    echo "  $p"
  done
  if [ -n "$phase_name" ]; then
    printf '  %-14s %6d s (failed)\n' "$phase_name" $((SECONDS - phase_start))
  fi
  printf '  %-14s %6d s\n' total "$SECONDS"
  if [ -f "$ctest_log" ] && grep -q '^Label Time Summary:' "$ctest_log"; then
    echo "== ctest's label summary"
    sed -n '/^Label Time Summary:/,/^$/{/^Label Time Summary:/d;/^$/d;s/^/  /;p}' "$ctest_log"
    grep -h '^Total Test time (real)' "$ctest_log" | sed 's/^/  /'
  fi
  exit "$rc"
}
trap budget EXIT

run_ctest() {
  mkdir -p build
  (cd build && ctest --output-on-failure --timeout 900 -j2 "$@") | tee "$ctest_log"
}

SECONDS=0
rm -f "$ctest_log"
phase dependencies bash scripts/install-deps.sh
# The arm64 side of issue 39: qemu-user, gdb-multiarch and an arm64 sysroot
# (it.arch_read: an arm64 Ruby read on this machine), the cross compiler and
# its sysroot (the aarch64 build below); some 70 MB of packages.
phase "arm64 tools" bash scripts/install-arm64.sh --build
phase "Ruby builds" bash scripts/build-rubies.sh
phase "rbpeek build" bash -c 'cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build -j"$(nproc)"'
phase ctest run_ctest "$@"
# The whole run only (no ctest arguments): rbpeek built for aarch64 and its
# unit tests run under qemu-aarch64 (about 3 minutes on 2 CPUs).
if [ $# -eq 0 ]; then
  phase "arm64 build" bash scripts/build-arm64.sh --no-deb
fi
