# Workload for tests/bench/bench_sample.py: a fixed CPU-bound loop that
# counts its own iterations, so that the slowdown a profiler causes can be
# read off the program's own throughput.
#
#   ruby sample_workload.rb OUT_DIR [stackprof MODE HZ DELAY SECONDS]
#
# Every 50 ms it appends "REALTIME ITERATIONS RUN_NS WAIT_NS" to
# OUT_DIR/iterations.log: the main thread's time on a CPU and waiting for one
# so far, from the kernel (/proc/thread-self/schedstat), so that the time it
# spent stopped by a debugger (neither) can be told apart from the time other
# processes on the machine took its CPU.
# Two idle threads sit beside it (one sleeping, one blocked on a pipe), as
# in most real programs. With "stackprof ...", it profiles itself with
# stackprof (in-process, signal driven) from DELAY to DELAY + SECONDS after
# it is ready, and appends "REALTIME profile-start" / "profile-end" to the
# log, plus the number of samples stackprof took.

OUT = ARGV[0] or abort("usage: sample_workload.rb OUT_DIR [stackprof MODE HZ DELAY SECONDS]")
PROF = ARGV[1] == "stackprof" ? { mode: ARGV[2].to_sym, hz: ARGV[3].to_f, delay: ARGV[4].to_f,
                                  seconds: ARGV[5].to_f } : nil
require "stackprof" if PROF

def unit_of_work
  # A little of what Ruby programs do: method calls, blocks, integer
  # arithmetic, a small array.
  acc = 0
  [3, 1, 4, 1, 5, 9, 2, 6].each_with_index do |v, i|
    acc = (acc * 31 + helper(v, i)) & 0xffffff
  end
  acc
end

def helper(v, i)
  x = v
  20.times { |k| x = (x * 7 + k + i) & 0xffff }
  x
end

sleeper = Thread.new { sleep }
reader_io, _writer_io = IO.pipe
reader = Thread.new { reader_io.read(1) }
sleeper.name = "sleeper"
reader.name = "reader"

log = File.open(File.join(OUT, "iterations.log"), "a")
log.sync = true
iterations = 0
last = 0.0
ready_at = nil
state = :before
loop do
  unit_of_work
  iterations += 1
  next unless (iterations & 63).zero?
  now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  next if now - last < 0.05
  last = now
  run_ns, wait_ns = File.read("/proc/thread-self/schedstat").split.map(&:to_i)
  log.write(format("%.6f %d %d %d\n", Time.now.to_f, iterations, run_ns, wait_ns))
  unless ready_at
    ready_at = now
    File.write(File.join(OUT, "ready"), Process.pid.to_s)
  end
  next unless PROF
  if state == :before && now - ready_at >= PROF[:delay]
    StackProf.start(mode: PROF[:mode], interval: (1_000_000 / PROF[:hz]).round)
    log.write(format("%.6f profile-start\n", Time.now.to_f))
    state = :profiling
  elsif state == :profiling && now - ready_at >= PROF[:delay] + PROF[:seconds]
    StackProf.stop
    log.write(format("%.6f profile-end %d\n", Time.now.to_f, StackProf.results[:samples]))
    state = :after
  end
end
