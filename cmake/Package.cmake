# The Debian package: `cpack -G DEB` in the build directory packs what
# `cmake --install --prefix /usr` installs (cmake/Install.cmake) into
# rbpeek_<version>_<arch>.deb: amd64, or arm64 from the aarch64 cross build
# (cmake/toolchain-aarch64.cmake). Library dependencies come from dpkg-shlibdeps
# (libc6, libdw1 for librbpeek-unwind.so, libdwarf1, libelf1, libprotobuf-c1,
# zlib1g, libgmp10); python3 is named here. gdb is recommended
# (installed with it, the ruby binaries' auto-load stubs make `ruby ...`
# appear in every gdb session on a Ruby); lldb-16 is only suggested.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rbpeek)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Ruby backtraces, profiles, heap and lock views from gdb and lldb")
# The long description: plain lines, which CPack indents (and whose empty
# line it writes as " ."); the summary above is its first line.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "rbpeek decodes CRuby's interpreter state (stacks of every thread, Mutex
owners and waiters, a heap census) from raw memory reads only, on live
processes and core files, for CRuby 2.7 to 4.0, including stripped distro
Rubies. It never runs code in the target. gdb loads its `ruby` commands by
itself when it debugs a Debian or Ubuntu Ruby; in lldb-16, `command script
import rbpeek`.

Also: the same commands without a debugger (rbpeek), librbpeek (shared,
static, pkg-config), rbpeek-flamegraph and rbpeek-layoutgen.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# The architecture the objects were built for (not the build machine's).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
else()
  message(FATAL_ERROR "no Debian architecture known here for the processor ${CMAKE_SYSTEM_PROCESSOR}: "
                      "cmake/Package.cmake names amd64 and arm64")
endif()
set(CPACK_DEBIAN_PACKAGE_SECTION debug)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(RBPEEK_DEB_MAINTAINER "rbpeek maintainers <rbpeek@localhost>" CACHE STRING "The .deb's Maintainer field")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${RBPEEK_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
if(CMAKE_CROSSCOMPILING)
  # dpkg-shlibdeps runs on the host: it reads the target's objects with
  # that architecture's objdump (DEB_HOST_ARCH), finds their libraries in
  # the sysroot, and their packages, shlibs and symbols in the sysroot's own
  # dpkg database (scripts/install-arm64.sh --build makes it; DPKG_ADMINDIR).
  # cpack reads these when it runs (CPACK_PROJECT_CONFIG_FILE).
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
      "${CMAKE_SYSROOT}/lib/${CMAKE_LIBRARY_ARCHITECTURE};${CMAKE_SYSROOT}/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}")
  if(NOT EXISTS "${CMAKE_SYSROOT}/var/lib/dpkg/status")
    message(FATAL_ERROR "the sysroot ${CMAKE_SYSROOT} has no dpkg database for the .deb's dependencies: "
                        "scripts/install-arm64.sh --build makes it")
  endif()
  file(WRITE ${CMAKE_BINARY_DIR}/CPackCross.cmake
       "set(ENV{DEB_HOST_ARCH} ${CPACK_DEBIAN_PACKAGE_ARCHITECTURE})\n"
       "set(ENV{DPKG_ADMINDIR} \"${CMAKE_SYSROOT}/var/lib/dpkg\")\n")
  set(CPACK_PROJECT_CONFIG_FILE ${CMAKE_BINARY_DIR}/CPackCross.cmake)
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "gdb")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "lldb-16, python3-lldb-16")
# A shlibs file, for the shared library.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# Maintainer scripts: postinst byte-compiles the Python package and prerm
# removes the byte-compiled files (docs/install.md). Ours replaces the
# postinst CPack would write, which ran ldconfig: the triggers file has
# libc-bin run it instead, as dh_makeshlibs arranges (CPack's postrm, which
# runs it on removal, stays).
if(IS_ABSOLUTE "${RBPEEK_INSTALL_DATADIR}")
  set(RBPEEK_DEB_PYTHON_DIR "${RBPEEK_INSTALL_DATADIR}/python")
else()
  set(RBPEEK_DEB_PYTHON_DIR "${CPACK_PACKAGING_INSTALL_PREFIX}/${RBPEEK_INSTALL_DATADIR}/python")
endif()
foreach(file postinst prerm triggers)   # CPack names each by its file name
  configure_file(${CMAKE_SOURCE_DIR}/cmake/deb-${file}.in ${CMAKE_BINARY_DIR}/deb-control/${file} @ONLY)
  list(APPEND CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/deb-control/${file})
endforeach()
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)
include(CPack)
