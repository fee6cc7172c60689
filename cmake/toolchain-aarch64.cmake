# The aarch64 (arm64) cross build (issue 39): Debian's gcc-aarch64-linux-gnu
# against a sysroot of Debian's arm64 -dev packages, which
# `scripts/install-arm64.sh --build` unpacks (dpkg -x: the host's packages
# stay as they are), and the target's programs (the unit tests) run under
# qemu-aarch64 with that same sysroot as its -L. scripts/build-arm64.sh
# configures with it; docs/testing.md says what runs there and what skips.
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake
# The sysroot: $RBPEEK_ARM64_BUILD_SYSROOT, else -DRBPEEK_ARM64_BUILD_SYSROOT,
# else /var/cache/rbpeek/arm64-build-sysroot.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

if(DEFINED ENV{RBPEEK_ARM64_BUILD_SYSROOT})
  set(RBPEEK_ARM64_BUILD_SYSROOT "$ENV{RBPEEK_ARM64_BUILD_SYSROOT}")
elseif(NOT RBPEEK_ARM64_BUILD_SYSROOT)
  set(RBPEEK_ARM64_BUILD_SYSROOT /var/cache/rbpeek/arm64-build-sysroot)
endif()
if(NOT EXISTS "${RBPEEK_ARM64_BUILD_SYSROOT}/usr/include/stdio.h")
  message(FATAL_ERROR "no arm64 build sysroot at ${RBPEEK_ARM64_BUILD_SYSROOT}: "
                      "scripts/install-arm64.sh --build makes it")
endif()
# try_compile projects read this file again without the cache: pass it on.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES RBPEEK_ARM64_BUILD_SYSROOT)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_SYSROOT "${RBPEEK_ARM64_BUILD_SYSROOT}")
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)   # Debian's multiarch directories
# Libraries and headers from the sysroot only, programs (protoc-c, python3)
# from the host.
set(CMAKE_FIND_ROOT_PATH "${RBPEEK_ARM64_BUILD_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config reads the sysroot's .pc files, never the host's, and prefixes
# their paths with it.
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_LIBDIR}
    "${RBPEEK_ARM64_BUILD_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${RBPEEK_ARM64_BUILD_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${RBPEEK_ARM64_BUILD_SYSROOT}")

# ctest runs each test executable through this (and so does anything run
# with CMAKE_CROSSCOMPILING_EMULATOR); its dynamic loader and libraries
# come from the sysroot.
find_program(RBPEEK_QEMU_AARCH64 qemu-aarch64)
if(RBPEEK_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${RBPEEK_QEMU_AARCH64};-L;${RBPEEK_ARM64_BUILD_SYSROOT}")
endif()
