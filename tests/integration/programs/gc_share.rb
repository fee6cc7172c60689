# Test target for the GC frames of `ruby sample` (docs/native.md): the main
# thread alternates a method that allocates (and so triggers the GC) with
# one that does not, forever, and measures the time its own GC takes:
# GC.stat(:time) on 3.1 and later (CPU time; none on 2.7: 0 logged), the
# wall time between the GC's enter and exit events (NativeExt), and the
# GC's own flag polled every 200 us by a thread of NativeExt's.
# About every 20 ms it appends "<monotonic s> <GC CPU s> <process CPU s>
# <GC wall s> <polls> <polls in the GC> <thread CPU s> <CPU s inside the
# GC's flag> <GC windows> <CPU s one clock read costs>" to OUT_DIR/gc.log,
# so that a test can take the GC's share of any window and compare it with
# the share of samples that name it. The thread CPU time and the CPU time
# inside the flag are the main thread's own (CLOCK_THREAD_CPUTIME_ID): the
# GC runs on it, and the poller's CPU time is in the process's.
#
#   ruby gc_share.rb OUT_DIR
#
# Writes OUT_DIR/ready once the loop runs. Runs unchanged on Ruby 2.7 to
# 4.0, with no gems.

OUT = ARGV[0] or abort("usage: gc_share.rb OUT_DIR")
require File.join(OUT, "native_ext")
NativeExt.gc_wall_time # starts counting
NativeExt.gc_flag_polls # starts polling
# The CPU time inside the flag where Ruby has GC.stat(:time) (3.1 and
# later): 2.7's GC runs in so many steps that a clock read in each drew a
# tracer's stops (docs/native.md); there the flag is the measure.
CPU_IN_FLAG = GC.respond_to?(:stat) && GC.stat.key?(:time)
NativeExt.gc_cpu_time if CPU_IN_FLAG

if GC.respond_to?(:stat) && GC.stat.key?(:time)
  File.write(File.join(OUT, "cpu_measure"), "GC.stat(:time)")
  def gc_seconds
    GC.stat(:time) / 1000.0
  end
else
  # No CPU-time measure on 2.7: the GC's flag (in wall time) is the
  # measure. Not GC::Profiler: it leaves out most of the lazy sweeping
  # steps between GCs (33% where the flag was set 55% of the time), and it
  # reads the process's CPU clock, a system call, twice in each of some
  # 17,000 steps a second; a tracer's stops land at a return from the
  # kernel, and so did 7 points more often in the GC than the flag was set
  # (docs/native.md).
  File.write(File.join(OUT, "cpu_measure"), "none")
  def gc_seconds
    0.0
  end
end

def allocating
  kept = []
  1500.times { |i| kept << Array.new(40) { |j| "s#{i}-#{j}" } }
  kept.size
end

def computing
  x = 0
  i = 0
  while i < 30_000
    x += i * i
    i += 1
  end
  x
end

log = File.open(File.join(OUT, "gc.log"), "w")
log.sync = true
File.write(File.join(OUT, "ready"), Process.pid.to_s)
# The main thread logs between two rounds, itself: a recorder thread would
# take the GVL from it every 20 ms, and the time it waited for it is wall
# time outside the GC that its CPU time does not count.
last = 0.0
loop do
  allocating
  computing
  now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  next if now - last < 0.02
  last = now
  polls, polls_in = NativeExt.gc_flag_polls
  in_flag, windows, read_cost = CPU_IN_FLAG ? NativeExt.gc_cpu_time : [0.0, 0, 0.0]
  log.write(format("%.6f %.6f %.6f %.6f %d %d %.6f %.6f %d %.9f\n", now, gc_seconds,
                   Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID), NativeExt.gc_wall_time,
                   polls, polls_in, Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID), in_flag, windows,
                   read_cost))
end
