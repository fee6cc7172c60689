# An arm64 Ruby (Debian's arm64 ruby3.1 under qemu-aarch64) read on this
# x86-64 machine: its core in the command line, gdb-multiarch and lldb-16,
# and live through gdb-multiarch on qemu's gdb stub (test_arch_read.py).
# Opt-in: it skips, saying why, until scripts/install-arm64.sh has run
# (docs/testing.md).
rbpeek_plain_test(arch_read test_arch_read.py)
