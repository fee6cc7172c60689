# Builds core/src layer by layer (see LayerRules.cmake). Each layer is an
# OBJECT library whose include path is a folder of links to exactly the
# layers it may see, build-dir/layers/<layer>/<seen> -> core/src/<seen>, so
# `#include "heap/heap.h"` in a vm/ source does not compile: an upward
# include is a compile error, not a review comment. librbpeek and its
# static twin are then linked from the same objects.
include(${CMAKE_CURRENT_LIST_DIR}/LayerRules.cmake)

# rbpeek_layer(NAME SEES <layers...> [SOURCES <extra sources>] [LIBS <targets>])
function(rbpeek_layer name)
  cmake_parse_arguments(L "" "" "SEES;SOURCES;LIBS" ${ARGN})
  set(root ${CMAKE_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root})
  foreach(seen ${name} ${L_SEES})
    if(IS_DIRECTORY ${CMAKE_SOURCE_DIR}/core/src/${seen})
      file(CREATE_LINK ${CMAKE_SOURCE_DIR}/core/src/${seen} ${root}/${seen} SYMBOLIC)
    endif()
  endforeach()
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/core/src/${name}/*.c)
  add_library(rbpeek_${name} OBJECT ${srcs} ${L_SOURCES})
  target_include_directories(rbpeek_${name} PRIVATE ${CMAKE_SOURCE_DIR}/core/include ${root})
  if(name STREQUAL "output")
    target_include_directories(rbpeek_${name} PRIVATE ${RBPEEK_GEN_DIR})   # output/pprof.pb-c.h
  endif()
  target_compile_definitions(rbpeek_${name} PRIVATE RBPEEK_BUILDING=1)
  set_target_properties(rbpeek_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  if(L_LIBS)
    target_link_libraries(rbpeek_${name} PRIVATE ${L_LIBS})
  endif()
  set_property(GLOBAL APPEND PROPERTY RBPEEK_LAYER_OBJECTS $<TARGET_OBJECTS:rbpeek_${name}>)
endfunction()

foreach(layer ${RBPEEK_LAYERS})
  set(extra "")
  set(libs "")
  if(layer STREQUAL "layout")
    set(extra ${RBPEEK_BUILTIN_C})   # the built-in tables, embedded from layouts/
    set(libs PkgConfig::LIBDWARF PkgConfig::LIBELF)
  elseif(layer STREQUAL "memory")
    set(libs PkgConfig::LIBELF)
  elseif(layer STREQUAL "inspect")
    set(libs PkgConfig::GMP)   # Bignum to decimal (inspect_num.c)
  elseif(layer STREQUAL "output")
    set(extra ${RBPEEK_PPROF_PB_C})   # protoc-c's code for output/pprof.proto
    set(libs PkgConfig::PROTOBUF_C ZLIB::ZLIB)
  endif()
  rbpeek_layer(${layer} SEES ${RBPEEK_SEES_${layer}} SOURCES ${extra} LIBS ${libs})
endforeach()
# The top: session.c opens and closes a session, so it sees every layer.
rbpeek_layer(session SEES ${RBPEEK_LAYERS} SOURCES ${CMAKE_SOURCE_DIR}/core/src/session.c)

get_property(RBPEEK_CORE_OBJECTS GLOBAL PROPERTY RBPEEK_LAYER_OBJECTS)
