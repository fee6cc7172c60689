# ruby sample: accuracy against the target's own CPU-clock split and thread
# selection, in gdb, lldb and the command line, on one program per Ruby.
# Accuracy is measured against the target's own CPU clocks: on a 2-core
# machine another test running beside it skews both, so the test runs alone.
# Not on 3.3.8-static: what accuracy measures (where the tracer's stops land
# against the GVL's turns) is the VM's and the tracer's, the same as in
# 3.3.8 built shared from the same source; what the static build changes
# (the symbols in the executable, no libruby.so, the native modules) is
# read by sample_other, bt and native on it. Running alone, it cost 34 s of
# the suite's wall time (issue 27).
set(RBPEEK_ACCURACY_RUBIES ${RBPEEK_TEST_RUBIES})
list(REMOVE_ITEM RBPEEK_ACCURACY_RUBIES 3.3.8-static)
rbpeek_ruby_test(sample test_sample.py RUN_SERIAL ARGS accuracy RUBIES ${RBPEEK_ACCURACY_RUBIES})
# The rest, which measures nothing and so shares the machine: --on-cpu, the
# command line's --duration and Ctrl-C, and the refusal of a core.
rbpeek_ruby_test(sample_other test_sample.py LABEL sample ARGS other)
# Target exit, Ctrl-C, an exception and a KeyboardInterrupt mid-sampling:
# debugger logic more than Ruby, so two Rubies (stripped and DWARF, old and new).
foreach(ruby debian-3.1 3.4.5)
  foreach(dbg gdb lldb)
    rbpeek_plain_test(sample_safety.${ruby}.${dbg} test_sample_safety.py ${ruby} ${dbg})
  endforeach()
endforeach()
# A GVL holder whose stack changes faster than it can be read: exact when
# it is stopped, torn reads caught (dropped, counted) with --nonblocking.
rbpeek_ruby_test(sample_churn test_sample_churn.py RUBIES debian-3.1 3.4.5)
# Parked threads sampled without being stopped (only the GVL holder, or
# nothing: --nonblocking) against `ruby bt -a` with every thread stopped.
rbpeek_ruby_test(sample_parked test_sample_parked.py)
