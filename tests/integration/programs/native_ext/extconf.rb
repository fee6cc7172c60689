# Makefile of the native_ext test extension for the Ruby that runs this
# (tests/integration/nativelib.py builds it in the test's work directory).
require "mkmf"
$CFLAGS << " -g"
create_makefile("native_ext")
