# ruby bt --native against the program's own record (test_native.py): one
# parked program per Ruby, with the native_ext extension built for it, serves
# gdb, lldb and the command line, live and on one core.
foreach(ruby ${RBPEEK_TEST_RUBIES})
  set(t it.native.${ruby})
  add_test(NAME ${t} COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/test_native.py ${ruby}
           WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  set_tests_properties(${t} PROPERTIES LABELS "integration;native" SKIP_RETURN_CODE 77 TIMEOUT 900
                       ENVIRONMENT "${RBPEEK_IT_ENV}")
endforeach()
