# ruby threads / ruby locks against the target's own view of its threads and
# locks (deadlocked and healthy programs), every Ruby x debugger x mode.
rbpeek_matrix_test(locks test_locks.py)
