# Benchmark workload for `ruby allocs` (tests/bench/bench_allocs.py): an
# allocation-heavy main thread (a few million small objects a second) that
# counts its own iterations and logs "REALTIME ITERATIONS CPU_SECONDS" (the
# process's CPU clock) every 50 ms to OUT_DIR/iter.log. With STACKPROF_OBJECT=INTERVAL in the environment it
# runs stackprof in mode: :object (one sample every INTERVAL allocations)
# from STACKPROF_START (default 2) s to 2 s later in its life, and logs "stackprof start" / "stackprof stop"
# lines with their times, so the bench can compare those seconds with the
# ones around them in the same process.
OUT = ARGV[0] or abort("usage: alloc_workload.rb OUT_DIR")
LOG = File.open(File.join(OUT, "iter.log"), "a")
LOG.sync = true
SP = ENV["STACKPROF_OBJECT"]
SP_START = Float(ENV["STACKPROF_START"] || 2)
require "stackprof" if SP

def work(n)
  i = 0
  while i < n
    s = "x" * 4
    a = [s, i]
    i += 1
  end
  a
end

t_start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
iters = 0
last = 0.0
phase = 0
File.write(File.join(OUT, "ready"), Process.pid.to_s)
loop do
  work(500)
  iters += 500
  now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  if SP && phase == 0 && now - t_start >= SP_START
    StackProf.start(mode: :object, interval: Integer(SP), raw: false)
    LOG.write(format("%.6f stackprof start\n", Time.now.to_f))
    phase = 1
  elsif SP && phase == 1 && now - t_start >= SP_START + 2
    StackProf.stop
    LOG.write(format("%.6f stackprof stop %d samples\n", Time.now.to_f, StackProf.results[:samples]))
    phase = 2
  end
  if now - last >= 0.05
    LOG.write(format("%.6f %d %.6f\n", Time.now.to_f, iters, Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)))
    last = now
  end
end
