# The rbpeek command line (tools/rbpeek, no debugger): bt, heap and sample
# on every Ruby of the matrix, each live (--pid) and on a core (--core);
# and its usage: --help, exit codes, one-line errors.
foreach(ruby ${RBPEEK_TEST_RUBIES})
  foreach(what bt heap sample)
    rbpeek_plain_test(cli.${what}.${ruby} test_cli.py ${what} ${ruby})
    set_tests_properties(it.cli.${what}.${ruby} PROPERTIES LABELS "integration;cli")
  endforeach()
  # Accuracy is measured against the target's own CPU clocks: alone (see sample.cmake).
  set_tests_properties(it.cli.sample.${ruby} PROPERTIES RUN_SERIAL TRUE)
endforeach()
rbpeek_plain_test(cli.usage test_cli.py usage)
set_tests_properties(it.cli.usage PROPERTIES LABELS "integration;cli")
