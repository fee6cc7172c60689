# A live Ruby whose heap holds a self-containing Rational and Complex
# (test_hostile.py): gdb and lldb must survive `ruby p` and
# `ruby bt -a --locals`, print rbpeek's marker, run the next command, and
# leave the target running and untraced. One test per Ruby runs both.
foreach(ruby ${RBPEEK_TEST_RUBIES})
  set(t it.hostile.${ruby})
  add_test(NAME ${t} COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/test_hostile.py ${ruby}
           WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  set_tests_properties(${t} PROPERTIES LABELS "integration;inspect;hostile" SKIP_RETURN_CODE 77 TIMEOUT 300
                       ENVIRONMENT "${RBPEEK_IT_ENV}")
endforeach()
