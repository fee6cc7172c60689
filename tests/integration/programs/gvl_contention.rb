# Test target for thread states (issue 26): 4 CPU-bound threads contend for
# one GVL, 4 threads sleep. Each CPU-bound thread measures its own share of
# the wall time on a CPU (its thread CPU clock against the wall clock): the
# rest of its time it waits for the GVL, since it never blocks otherwise.
#
#   ruby gvl_contention.rb OUT_DIR
#
# OUT_DIR/cpu-N.log: each wait of CPU-bound thread N for the GVL, "FROM
# TO", written by the thread itself when it ends (see crunch). Its CPU
# clock alone would count as waiting the time the kernel gives its CPU to
# another process while it holds the GVL. The main thread
# sleeps (blocked). OUT_DIR/expected.json names the threads; OUT_DIR/ready
# appears once every thread runs. Runs on Ruby 2.7 to 3.4, with no gems.

require "json"

OUT = ARGV[0] or abort("usage: gvl_contention.rb OUT_DIR")

def cpu_now
  Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
end

def spin(n)
  i = 0
  x = 0
  while i < n
    x = (x * 31 + i) & 0xffff
    i += 1
  end
  x
end

# Loops of about 0.1 ms, each ending with the thread's mark in $last: a gap
# of more than GAP between the ends of two loops after which $last is
# another thread's mark is a wait for the GVL (another thread ran: a GVL
# time slice is 100 ms). It is logged as it ends, by the thread itself:
# "FROM TO" (wall-clock seconds). A long gap with its own mark still there
# is the kernel running another process while it held the GVL: held. The
# rest of its time it held the GVL.
GAP = 0.010
$last = nil

def crunch(n)
  log = File.open(File.join(OUT, "cpu-#{n}.log"), "w")
  log.sync = true
  log.write(format("start %.6f\n", Time.now.to_f))
  prev = Time.now.to_f
  loop do
    spin(2_000)
    now = Time.now.to_f
    if now - prev >= GAP && $last != n
      # The write gives up the GVL and waits for it again: the next gap,
      # from now, is that wait, with another thread's mark if one ran.
      $last = n
      log.write(format("%.6f %.6f\n", prev, now))
    else
      $last = n
    end
    prev = now
  end
end

cpu = 4.times.map do |i|
  t = Thread.new { crunch(i + 1) }
  t.name = "cpu-#{i + 1}"
  t
end
sleepers = 4.times.map do |i|
  t = Thread.new { sleep }
  t.name = "sleep-#{i + 1}"
  t
end
sleep 0.2
File.write(File.join(OUT, "expected.json"),
           JSON.generate({"pid" => Process.pid, "ruby_version" => RUBY_VERSION,
                          "cpu" => cpu.map(&:name), "sleep" => sleepers.map(&:name)}))
File.write(File.join(OUT, "ready"), "")
loop { sleep 0.05 }
