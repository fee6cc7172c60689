# ruby sample: accuracy against the target's own CPU-clock split, thread
# selection and --on-cpu, on every Ruby and debugger (core: the refusal).
rbpeek_matrix_test(sample test_sample.py)
# Accuracy is measured against the target's own CPU clocks: on a 2-core
# machine another test running beside it skews both, so live runs go alone.
foreach(ruby ${RBPEEK_TEST_RUBIES})
  foreach(dbg ${RBPEEK_TEST_DEBUGGERS})
    if(TEST it.sample.${ruby}.${dbg}.live)
      set_tests_properties(it.sample.${ruby}.${dbg}.live PROPERTIES RUN_SERIAL TRUE)
    endif()
  endforeach()
endforeach()
# Target exit, Ctrl-C, an exception and a KeyboardInterrupt mid-sampling:
# debugger logic more than Ruby, so two Rubies (stripped and DWARF, old and new).
foreach(ruby debian-3.1 3.4.5)
  foreach(dbg gdb lldb)
    rbpeek_plain_test(sample_safety.${ruby}.${dbg} test_sample_safety.py ${ruby} ${dbg})
  endforeach()
endforeach()
# A GVL holder whose stack changes faster than it can be read: exact when
# it is stopped, torn reads caught (dropped, counted) with --nonblocking.
foreach(ruby debian-3.1 3.4.5)
  foreach(dbg gdb lldb)
    rbpeek_plain_test(sample_churn.${ruby}.${dbg} test_sample_churn.py ${ruby} ${dbg})
  endforeach()
endforeach()
# Parked threads sampled without being stopped (only the GVL holder, or
# nothing: --nonblocking) against `ruby bt -a` with every thread stopped.
foreach(ruby ${RBPEEK_TEST_RUBIES})
  foreach(dbg ${RBPEEK_TEST_DEBUGGERS})
    rbpeek_plain_test(sample_parked.${ruby}.${dbg} test_sample_parked.py ${ruby} ${dbg})
  endforeach()
endforeach()
