/*
 * Whether a unit test runs under an emulator: a cross build's ctest runs
 * each test executable under CMAKE_CROSSCOMPILING_EMULATOR (qemu-aarch64,
 * cmake/toolchain-aarch64.cmake) and names it in RBPEEK_TEST_EMULATOR.
 * What the kernel shows of an emulated process is then the emulator's
 * (/proc/PID/task, its threads' system calls), and qemu-user implements
 * neither ptrace nor the exec of another aarch64 program: a test of those
 * skips, saying why, and runs wherever it is built natively.
 */
#ifndef RBP_FIXTURE_EMULATOR_H
#define RBP_FIXTURE_EMULATOR_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* True, printing "[skip] under EMULATOR: why", when the test runs under an
 * emulator. */
static inline bool fixture_emulated(const char *why)
{
    const char *emu = getenv("RBPEEK_TEST_EMULATOR");
    if (!emu || !*emu) return false;
    fprintf(stderr, "\n  [skip] under %s: %s\n", emu, why);
    return true;
}

/* The reason shared by every test that starts a fixture program. */
#define FIXTURE_EMU_NO_CHILD                                                                              \
    "qemu-user runs the test alone: the fixture program it starts is aarch64's too, which the kernel "   \
    "cannot exec without a binfmt_misc handler, and ptrace and /proc of it would show the emulator"

#endif
