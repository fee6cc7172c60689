#!/usr/bin/env bash
# The README's test command, and what CI runs (.ci/run): installs what is
# missing, builds the CRuby test matrix (cached outside the checkout, so only
# the first run pays for it), builds rbpeek, and runs every test with ctest.
# Extra arguments go to ctest (e.g. -L unit, -R it.bt.3.4.5).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build-rubies.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
cd build
ctest --output-on-failure --timeout 900 -j2 "$@"
