# Every capability under YJIT (issue 36): Rails 7.2+ turns YJIT on for Ruby
# 3.3+, so most production Ruby runs JIT code. Each suite below runs again
# on one Ruby with YJIT on and every method compiled at its first call
# ("<ruby>+yjit": RUBYOPT="--yjit --yjit-call-threshold=1" for every program
# the test starts, harness.ruby_binary, which fails the test if YJIT is not
# on), checked against the same truths as without it. One Ruby a suite,
# spread over the three with YJIT, to keep the suite inside its budget
# (docs/test-budget.md). it.native_yjit (native.cmake) walks the machine
# stack through JIT code on all three.
function(rbpeek_yjit_test name script ruby)
  if(ruby IN_LIST RBPEEK_YJIT_RUBIES)
    rbpeek_ruby_test(${name} ${script} RUBIES ${ruby}+yjit ${ARGN})
  endif()
endfunction()

rbpeek_yjit_test(bt test_bt.py 3.4.5)                             # bt -a against backtrace_locations
rbpeek_yjit_test(native test_native.py 3.4.5)                     # bt --native, sample --native
rbpeek_yjit_test(inspect test_inspect.py debian-3.1)              # locals, p
rbpeek_yjit_test(thread_states test_thread_states.py 3.4.5 LABEL service)   # running, GVL wait, blocked
rbpeek_yjit_test(gc_share test_gc_share.py 3.4.5 RUN_SERIAL LABEL native)  # the GC frames and its share
rbpeek_yjit_test(service test_service.py debian-3.1)              # workers, --subprocesses (the new user's puma)
rbpeek_yjit_test(alloc_sites test_alloc_sites.py 3.3.8 LABEL allocs)         # allocation sites
rbpeek_yjit_test(sample_other test_sample.py 3.4.5 LABEL sample ARGS other)  # sample: --on-cpu, --duration, Ctrl-C
# The new user's clustered puma under RUBYOPT=--yjit on Debian's ruby3.1,
# sampled with --subprocesses --native: whole stacks through JIT code.
rbpeek_plain_test(puma.yjit test_puma.py yjit)

# The Ruby side of JIT code itself (test_yjit.py), on all three: `ruby bt`
# of threads parked from JIT-compiled code against their own
# backtrace_locations, and `sample` of a JIT-compiled loop (no stale line,
# no half-pushed frame, no running frame left out). The test turns YJIT
# on through the +yjit spec (harness.ruby_binary).
if(RBPEEK_YJIT_RUBIES)
  rbpeek_ruby_test(yjit test_yjit.py RUBIES ${RBPEEK_YJIT_RUBIES})
endif()
