# Test target for `ruby sample`: a CPU-bound main thread that splits its
# time between two methods, alpha and beta, and measures that split itself
# with its own thread CPU clock (CLOCK_THREAD_CPUTIME_ID), which counts only
# the time the thread really ran: time stopped under a debugger, or waiting
# for the GVL, is not counted.
#
#   ruby cpu_split.rb OUT_DIR [--burner] [--exit-on-file] [--spawn-threads]
#
# (The options may also come from RBPEEK_CPU_SPLIT_ARGS, since the test
# harness starts every program as "ruby PROGRAM OUT_DIR".)
#
# Every 50 ms it appends a line to OUT_DIR/cpu.log: "REALTIME ALPHA BETA",
# the wall clock and the cumulative CPU seconds spent in each method. The
# test takes the difference over exactly the time `ruby sample` ran and
# compares it with the profile: stopping a process a few hundred times a
# second disturbs its caches, which slows some code more than other code,
# so only the split measured while it was being sampled is comparable.
# Two threads that never run sit beside it (one
# in sleep, one blocked reading a pipe), and with --burner a third thread
# burns CPU too, so that at any moment one of the two CPU-bound threads
# holds the GVL and the other waits for it. --exit-on-file makes the program
# exit as soon as OUT_DIR/exit appears, for the test of a target exiting
# during sampling. --spawn-threads starts a short-lived thread every 20 ms
# (as a Timeout or a thread-per-request server does), for the test that
# threads born during sampling are traced and handed back to the debugger.
# Runs unchanged on Ruby 2.7 to 3.4, with no gems.

OUT = ARGV[0] or abort("usage: cpu_split.rb OUT_DIR [--burner] [--exit-on-file] [--spawn-threads]")
OPTS = ARGV[1..-1] + ENV.fetch("RBPEEK_CPU_SPLIT_ARGS", "").split
BURNER = OPTS.include?("--burner")
EXIT_FILE = OPTS.include?("--exit-on-file") ? File.join(OUT, "exit") : nil
SPAWN = OPTS.include?("--spawn-threads")

def cpu_now
  Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
end

# Plain integer loops: no allocation, so no GC runs inside one method and
# gets charged to the other.
def alpha
  i = 0
  x = 0
  while i < 80_000
    x = (x * 31 + i) & 0xffff
    i += 1
  end
  x
end

def beta
  i = 0
  x = 0
  while i < 25_000
    x = (x ^ (i * 7)) & 0xffff
    i += 1
  end
  x
end

def burn
  x = 0
  loop { x = (x + 1) & 0xffff }
end

$alpha_cpu = 0.0
$beta_cpu = 0.0
LOG = File.open(File.join(OUT, "cpu.log"), "a")
LOG.sync = true
LOG_EVERY = 0.05

def report
  LOG.write(format("%.6f %.9f %.9f\n", Time.now.to_f, $alpha_cpu, $beta_cpu))
end

sleeper = Thread.new { sleep }
sleeper.name = "sleeper"
reader_io, _writer_io = IO.pipe
reader = Thread.new { reader_io.read(1) }
reader.name = "reader"
if BURNER
  burner = Thread.new { burn }
  burner.name = "burner"
end
if SPAWN
  spawner = Thread.new do
    loop do
      Thread.new { sleep 0.01 }.join
      sleep 0.01
    end
  end
  spawner.name = "spawner"
end

warm = 0
last_report = 0.0
loop do
  t0 = cpu_now
  alpha
  t1 = cpu_now
  beta
  t2 = cpu_now
  $alpha_cpu += t1 - t0
  $beta_cpu += t2 - t1
  warm += 1
  now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  if now - last_report >= LOG_EVERY
    report
    last_report = now
    exit!(0) if EXIT_FILE && File.exist?(EXIT_FILE)
  end
  File.write(File.join(OUT, "ready"), Process.pid.to_s) if warm == 20
end
