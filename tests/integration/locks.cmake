# ruby threads / ruby locks against the target's own view of its threads and
# locks (deadlocked and healthy programs, each started once per Ruby), in
# every debugger x mode.
rbpeek_ruby_test(locks test_locks.py)
