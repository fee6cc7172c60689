# The whole service (issue 26): one pre-forking program per Ruby
# (programs/prefork.rb), checked by gdb, lldb and the command line, live
# and on a worker's core (test_service.py, matrix.py's combinations).
rbpeek_ruby_test(service test_service.py)
# `ruby COMMAND --help` and -h of every command inside gdb and lldb.
foreach(dbg ${RBPEEK_TEST_DEBUGGERS})
  rbpeek_plain_test(plugin_help.${dbg} test_plugin_help.py ${dbg})
endforeach()
# Thread states (running, GVL wait, blocked) and [GVL wait] frames against
# the kernel's view of each thread and the program's own clocks and counts
# (test_thread_states.py).
rbpeek_ruby_test(thread_states test_thread_states.py LABEL service)
# `rbpeek top` in a tmux pane: refresh, ranking, keys, Ctrl-C (test_top.py).
rbpeek_ruby_test(top test_top.py LABEL service RUBIES 2.7.4 3.4.5 debian-3.1)
# A Ruby in another PID and mount namespace, its files seen only inside
# (unshare; test_container.py).
rbpeek_ruby_test(container test_container.py LABEL service)
# Debian's puma in clustered mode serving a Sinatra app on 127.0.0.1 under
# a bounded load, on Debian's ruby3.1 (test_puma.py; skips without puma).
rbpeek_plain_test(puma test_puma.py)
