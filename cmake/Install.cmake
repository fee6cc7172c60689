# What `cmake --install` puts under the prefix, and how the installed pieces
# find each other. Every path between them is relative, so an installed tree
# works under any prefix, and still works after being moved (docs/install.md):
#
#   lib/librbpeek.so.0, lib/librbpeek-unwind.so.1 (the native unwinder, beside it),
#       lib/librbpeek.a, include/rbpeek.h (and the rbpeek_profile.h it includes),
#       lib/pkgconfig/rbpeek.pc
#   bin/<tool> and share/man/man1/<tool>.1 for each tool in RBPEEK_INSTALL_TOOLS
#   share/rbpeek/{python/rbpeeklib,gdb-plugin,lldb-plugin,tools/rbpeek}: the source tree's own
#       layout, so the plugins and the command line find python/ the same way installed or not
#       (bin/rbpeek is a link to tools/rbpeek);
#       rbpeeklib/core/install_paths.py tells the binding where librbpeek is
#   share/gdb/auto-load/<objfile>-gdb.py: stubs gdb runs when it loads a Ruby
#   lib/python3/dist-packages/rbpeek.py: lldb's `command script import rbpeek`
include(GNUInstallDirs)

set(RBPEEK_INSTALL_DATADIR "${CMAKE_INSTALL_DATADIR}/rbpeek" CACHE STRING
    "Where the Python package and the debugger plugins go (relative to the prefix)")
set(RBPEEK_GDB_AUTOLOAD_DIR "${CMAKE_INSTALL_DATADIR}/gdb/auto-load" CACHE STRING
    "gdb's \$datadir/auto-load (relative to the prefix); empty: no auto-load stubs")
set(RBPEEK_PYTHON_MODULE_DIR "lib/python3/dist-packages" CACHE STRING
    "A directory on the Python path of lldb (relative to the prefix); empty: no `rbpeek` module")

# rbpeek_relpath(VAR FROM_DIR TO): TO as seen from FROM_DIR, both relative to
# the prefix. An absolute one (a cache variable set so) makes TO absolute:
# that tree then works at its configured prefix only.
function(rbpeek_relpath var from to)
  if(IS_ABSOLUTE "${from}" OR IS_ABSOLUTE "${to}")
    if(IS_ABSOLUTE "${to}")
      set(${var} "${to}" PARENT_SCOPE)
    else()
      set(${var} "${CMAKE_INSTALL_PREFIX}/${to}" PARENT_SCOPE)
    endif()
    return()
  endif()
  file(RELATIVE_PATH rel "/PREFIX/${from}" "/PREFIX/${to}")
  string(REGEX REPLACE "/$" "" rel "${rel}")
  set(${var} "${rel}" PARENT_SCOPE)
endfunction()

set(RBPEEK_INSTALL_GEN ${CMAKE_BINARY_DIR}/install-gen)
file(REMOVE_RECURSE ${RBPEEK_INSTALL_GEN})  # no stubs left over from an earlier configure

# --- the C library -----------------------------------------------------------
install(TARGETS rbpeek LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The native unwinder, loaded by librbpeek from beside itself (docs/native.md).
# By its soname alone: nothing links against it, so no librbpeek-unwind.so link.
install(TARGETS rbpeek_unwind LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_SKIP)
install(TARGETS rbpeek_static ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_SOURCE_DIR}/core/include/rbpeek.h ${CMAKE_SOURCE_DIR}/core/include/rbpeek_profile.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# What a static link needs besides librbpeek.a. Debian 12's libdwarf-dev has
# no libdwarf.pc: then it is named in Libs.private.
if(LIBDWARF_FOUND)
  set(RBPEEK_PC_REQUIRES "libelf libdwarf libprotobuf-c zlib gmp")
  set(RBPEEK_PC_LIBS "-lm")
else()
  set(RBPEEK_PC_REQUIRES "libelf libprotobuf-c zlib gmp")
  set(RBPEEK_PC_LIBS "-ldwarf -lm")
endif()
rbpeek_relpath(RBPEEK_PC_PREFIX "${CMAKE_INSTALL_LIBDIR}/pkgconfig" "")
configure_file(${CMAKE_SOURCE_DIR}/cmake/rbpeek.pc.in ${RBPEEK_INSTALL_GEN}/rbpeek.pc @ONLY)
install(FILES ${RBPEEK_INSTALL_GEN}/rbpeek.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# --- tools and their man pages -------------------------------------------------
# tools/rbpeek-factsgen.py is not installed: it makes this tree's layouts/
# from the bindgen facts and needs rustc; users never run it (docs/install.md).
set(RBPEEK_INSTALL_TOOLS rbpeek rbpeek-flamegraph rbpeek-layoutgen)
foreach(tool rbpeek-flamegraph rbpeek-layoutgen)
  install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endforeach()
foreach(tool ${RBPEEK_INSTALL_TOOLS})
  install(FILES ${CMAKE_SOURCE_DIR}/docs/man/${tool}.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endforeach()
# The rbpeek command line finds python/ beside its real path (tools/../python),
# so it goes where it is in the source tree, relative to python/, and bin/
# holds a relative symbolic link to it.
# Installed, it runs the Python the package depends on (python3), as
# dh_python3 makes Debian's scripts do: the source tree's `env python3`
# would take whatever python3 comes first on PATH (a pyenv shim costs
# 135 ms of CPU before Python starts, and its Python cannot use the .pyc
# files the package's postinst compiled).
set(RBPEEK_INSTALL_PYTHON "/usr/bin/python3" CACHE STRING "The interpreter of the installed rbpeek command line")
file(READ ${CMAKE_SOURCE_DIR}/tools/rbpeek RBPEEK_CLI_TEXT)
string(REGEX REPLACE "^#![^\n]*" "#!${RBPEEK_INSTALL_PYTHON}" RBPEEK_CLI_TEXT "${RBPEEK_CLI_TEXT}")
file(WRITE ${RBPEEK_INSTALL_GEN}/rbpeek "${RBPEEK_CLI_TEXT}")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tools/rbpeek)
install(PROGRAMS ${RBPEEK_INSTALL_GEN}/rbpeek DESTINATION ${RBPEEK_INSTALL_DATADIR}/tools)
rbpeek_relpath(RBPEEK_CLI_REL "${CMAKE_INSTALL_BINDIR}" "${RBPEEK_INSTALL_DATADIR}/tools/rbpeek")
install(CODE "
  set(link \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/rbpeek\")
  message(STATUS \"Installing: \${link} -> ${RBPEEK_CLI_REL}\")
  file(MAKE_DIRECTORY \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
  file(CREATE_LINK \"${RBPEEK_CLI_REL}\" \"\${link}\" SYMBOLIC)
")

# --- the Python package and the plugins -------------------------------------------
install(DIRECTORY ${CMAKE_SOURCE_DIR}/python/rbpeeklib DESTINATION ${RBPEEK_INSTALL_DATADIR}/python
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
install(FILES ${CMAKE_SOURCE_DIR}/gdb-plugin/rbpeek.py DESTINATION ${RBPEEK_INSTALL_DATADIR}/gdb-plugin)
install(FILES ${CMAKE_SOURCE_DIR}/lldb-plugin/rbpeek.py DESTINATION ${RBPEEK_INSTALL_DATADIR}/lldb-plugin)

rbpeek_relpath(RBPEEK_LIBRARY_REL "${RBPEEK_INSTALL_DATADIR}/python/rbpeeklib/core"
               "${CMAKE_INSTALL_LIBDIR}/librbpeek.so.${PROJECT_VERSION_MAJOR}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/install_paths.py.in ${RBPEEK_INSTALL_GEN}/install_paths.py @ONLY)
install(FILES ${RBPEEK_INSTALL_GEN}/install_paths.py DESTINATION ${RBPEEK_INSTALL_DATADIR}/python/rbpeeklib/core)

# lldb imports modules from its Python's path: a module named rbpeek there
# makes `command script import rbpeek` work (lldb 16 reads no system-wide
# lldbinit, so this one line, or the plugin's full path, is the lldb route).
if(RBPEEK_PYTHON_MODULE_DIR)
  rbpeek_relpath(RBPEEK_LLDB_PLUGIN_REL "${RBPEEK_PYTHON_MODULE_DIR}"
                 "${RBPEEK_INSTALL_DATADIR}/lldb-plugin/rbpeek.py")
  configure_file(${CMAKE_SOURCE_DIR}/cmake/lldb-module.py.in ${RBPEEK_INSTALL_GEN}/rbpeek.py @ONLY)
  install(FILES ${RBPEEK_INSTALL_GEN}/rbpeek.py DESTINATION ${RBPEEK_PYTHON_MODULE_DIR})
endif()

# --- gdb auto-load stubs ------------------------------------------------------------
# gdb looks for <auto-load dir>/<realpath of each objfile>-gdb.py. The ruby
# binaries of Debian and Ubuntu (/usr/bin/rubyX.Y) keep their name across
# patch releases; their libruby's real name carries the patch release
# (libruby-3.1.so.3.1.7), so there is a stub for every release rbpeek has a
# table for (embedders load libruby without a ruby binary). /usr/local/bin/ruby
# is where a Ruby built from source installs by default.
if(RBPEEK_GDB_AUTOLOAD_DIR)
  # Debian's multiarch directory of the machine the package is for.
  set(RBPEEK_MULTIARCH "${CMAKE_LIBRARY_ARCHITECTURE}")
  if(NOT RBPEEK_MULTIARCH)
    set(RBPEEK_MULTIARCH "${CMAKE_SYSTEM_PROCESSOR}-linux-gnu")
  endif()
  set(objfiles /usr/local/bin/ruby)
  set(lines "")
  foreach(table ${RBPEEK_LAYOUT_FILES})
    get_filename_component(release ${table} NAME_WLE)
    if(release MATCHES "^([0-9]+)\\.([0-9]+)\\.([0-9]+)$")
      set(line "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
      list(APPEND objfiles "/usr/lib/${RBPEEK_MULTIARCH}/libruby-${line}.so.${release}")
      list(APPEND lines ${line})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES lines)
  foreach(line ${lines})
    list(APPEND objfiles "/usr/bin/ruby${line}")
  endforeach()
  foreach(objfile ${objfiles})
    get_filename_component(dir "${RBPEEK_GDB_AUTOLOAD_DIR}${objfile}" DIRECTORY)
    rbpeek_relpath(RBPEEK_GDB_PLUGIN_REL "${dir}" "${RBPEEK_INSTALL_DATADIR}/gdb-plugin/rbpeek.py")
    set(RBPEEK_AUTOLOAD_OBJFILE "${objfile}")
    configure_file(${CMAKE_SOURCE_DIR}/cmake/gdb-autoload.py.in ${RBPEEK_INSTALL_GEN}/auto-load${objfile}-gdb.py @ONLY)
  endforeach()
  install(DIRECTORY ${RBPEEK_INSTALL_GEN}/auto-load/ DESTINATION ${RBPEEK_GDB_AUTOLOAD_DIR})
endif()
