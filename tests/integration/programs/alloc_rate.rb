# Test target for `ruby allocs`: two threads allocate at known sites (the
# main thread strings in make_strings, a second thread arrays in
# make_arrays, three strings for every array), and the program measures its
# own allocations with GC.stat(:total_allocated_objects) and GC.count.
#
#   ruby alloc_rate.rb OUT_DIR
#
# Every 50 ms the main thread appends "REALTIME TOTAL_ALLOCATED GC_COUNT" to
# OUT_DIR/alloc.log. The test takes the difference over exactly the time
# `ruby allocs` counted (its JSON gives the wall-clock start and end) and
# compares it with what rbpeek read from outside. Writes OUT_DIR/ready once
# warm (200 rounds); from then on both threads allocate only while
# OUT_DIR/busy exists (a test creates it around each run it checks:
# harness.Target.computing) and nap 10 ms at a time otherwise, the main
# thread still logging. It exits (status 0) as soon as OUT_DIR/exit appears, for the test
# of a target exiting while it is counted. Runs unchanged on Ruby 2.7 to
# 3.4, with no gems.

OUT = ARGV[0] or abort("usage: alloc_rate.rb OUT_DIR")
LOG = File.open(File.join(OUT, "alloc.log"), "a")
LOG.sync = true
EXIT_FILE = File.join(OUT, "exit")

def make_strings(n)
  i = 0
  while i < n
    "s" * 3
    i += 1
  end
end

def make_arrays(n)
  i = 0
  while i < n
    [i]
    i += 1
  end
end

BUSY = File.join(OUT, "busy")
$busy = true
arrays = Thread.new { loop { $busy ? make_arrays(1000) : sleep(0.01); Thread.pass } }
arrays.name = "arrays"

last = 0.0
warm = 0
loop do
  if $busy
    make_strings(3000)
    warm += 1
    File.write(File.join(OUT, "ready"), Process.pid.to_s) if warm == 200
  else
    sleep 0.01
    $busy = File.exist?(BUSY)
  end
  now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  if now - last >= 0.05
    LOG.write(format("%.6f %d %d\n", Time.now.to_f, GC.stat(:total_allocated_objects), GC.count))
    last = now
    exit!(0) if File.exist?(EXIT_FILE)
    $busy = warm < 200 || File.exist?(BUSY)
  end
end
