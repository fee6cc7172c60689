# ruby gc / ruby p / ruby bt --locals against the target's own record: one
# parked program per Ruby serves gdb and lldb, live and on a core
# (test_inspect.py runs all four).
rbpeek_ruby_test(inspect test_inspect.py)

# ruby page: each recorded object's page against ObjectSpace.dump's view
# (test_page.py: gdb and lldb, live and core, and the command line).
rbpeek_ruby_test(page test_page.py LABEL inspect)
