# The rbpeek command line's usage: --help, exit codes, one-line errors. (Its
# bt, heap, sample and page are checked against each program by the suite of
# the command: it.bt, it.heap, it.sample, it.page.)
rbpeek_plain_test(cli.usage test_cli.py usage)
set_tests_properties(it.cli.usage PROPERTIES LABELS "integration;cli")
