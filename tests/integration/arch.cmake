# A Ruby of an architecture rbpeek does not read (Debian's arm64 ruby3.1
# under qemu-aarch64) is refused in one line by the command line, gdb-multiarch
# and lldb-16, on its core and live (test_arch_refusal.py). Opt-in: it skips,
# saying why, until scripts/install-arm64.sh has run (docs/testing.md).
rbpeek_plain_test(arch_refusal test_arch_refusal.py)
