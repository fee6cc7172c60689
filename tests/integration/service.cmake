# The whole service (issue 26): one pre-forking program per Ruby
# (programs/prefork.rb), checked by gdb, lldb and the command line in one
# test: kernel thread ids in forked workers, and more (test_service.py).
foreach(ruby ${RBPEEK_TEST_RUBIES})
  rbpeek_plain_test(service.${ruby} test_service.py ${ruby})
  set_tests_properties(it.service.${ruby} PROPERTIES LABELS "integration;service")
endforeach()
# `ruby COMMAND --help` and -h of every command inside gdb and lldb.
foreach(dbg ${RBPEEK_TEST_DEBUGGERS})
  rbpeek_plain_test(plugin_help.${dbg} test_plugin_help.py ${dbg})
endforeach()
