# ruby gc / ruby p / ruby bt --locals against the target's own record: one
# parked program per Ruby serves gdb and lldb, live and on a core
# (test_inspect.py runs all four).
foreach(ruby ${RBPEEK_TEST_RUBIES})
  set(t it.inspect.${ruby})
  add_test(NAME ${t} COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/test_inspect.py ${ruby}
           WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  set_tests_properties(${t} PROPERTIES LABELS "integration;inspect" SKIP_RETURN_CODE 77 TIMEOUT 600
                       ENVIRONMENT "${RBPEEK_IT_ENV}")
endforeach()

# ruby page: each recorded object's page against ObjectSpace.dump's view
# (test_page.py: gdb and lldb, live and core, and the command line).
foreach(ruby ${RBPEEK_TEST_RUBIES})
  set(t it.page.${ruby})
  add_test(NAME ${t} COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/test_page.py ${ruby}
           WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  set_tests_properties(${t} PROPERTIES LABELS "integration;inspect" SKIP_RETURN_CODE 77 TIMEOUT 900
                       ENVIRONMENT "${RBPEEK_IT_ENV}")
endforeach()
