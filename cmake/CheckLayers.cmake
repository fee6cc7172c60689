# The layering check behind ctest's layers.check:
#   cmake -DSRC=<source dir> -P cmake/CheckLayers.cmake
# Every quoted #include in core/src/<layer>/, its subfolders too (native/dwfl/
# is the native layer's), must name rbpeek.h or a header of that layer or of
# a layer it sees (LayerRules.cmake), as "<layer>/x.h" or "<layer>/sub/x.h".
# The build already rejects an upward include from a source file; this also
# covers headers (a header is compiled only where it is included, so an
# upward include in it can go unnoticed) and paths that climb out with "..".
cmake_minimum_required(VERSION 3.18)
include(${CMAKE_CURRENT_LIST_DIR}/LayerRules.cmake)
set(bad "")
foreach(layer ${RBPEEK_LAYERS})
  file(GLOB_RECURSE files ${SRC}/core/src/${layer}/*.c ${SRC}/core/src/${layer}/*.h ${SRC}/core/src/${layer}/*.def)
  foreach(f ${files})
    file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line ${lines})
      string(REGEX REPLACE "^[^\"]*\"([^\"]*)\".*" "\\1" inc "${line}")
      file(RELATIVE_PATH rel ${SRC} ${f})
      if(inc STREQUAL "rbpeek.h")
        continue()
      endif()
      string(REPLACE ";" ", " sees "${layer};${RBPEEK_SEES_${layer}}")
      string(REGEX MATCH "^([a-z_]+)/([a-z_]+/)*[A-Za-z0-9_.-]+$" m "${inc}")   # "-": protoc-c's .pb-c.h
      set(to "${CMAKE_MATCH_1}")
      if(NOT m OR inc MATCHES "\\.\\.")
        string(APPEND bad "  ${rel}: #include \"${inc}\" (name it as \"<layer>/[<folder>/]<header>\")\n")
      elseif(NOT to STREQUAL layer AND NOT to IN_LIST RBPEEK_SEES_${layer})
        string(APPEND bad "  ${rel}: #include \"${inc}\" (${layer}/ may include ${sees})\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "includes that break the layering of core/src (see docs/design.md):\n${bad}")
endif()
message(STATUS "core/src layering holds")
