# Test target for thread states (issue 26): 4 CPU-bound threads contend for
# one GVL, 4 threads sleep. Each CPU-bound thread records its own waits for
# the GVL (see crunch); the rest of its time it held the GVL, since it never
# blocks otherwise. Its CPU clock alone would not do: it would count as
# waiting the time the kernel gives its CPU to another process while it
# holds the GVL, as on a loaded machine.
#
#   ruby gvl_contention.rb OUT_DIR
#
# OUT_DIR/cpu-N.log: thread N's waits, "FROM TO" (wall-clock seconds),
# and its naps, "nap FROM TO", written by the main thread, which otherwise
# sleeps (blocked). Once ready, the CPU-bound threads compute only while
# OUT_DIR/busy exists (a test creates it around each run it checks:
# harness.Target.computing) and nap 10 ms at a time otherwise: a nap is
# neither a wait nor a hold of the GVL (the thread sleeps).
# OUT_DIR/expected.json names the threads; OUT_DIR/ready appears once every
# thread runs. Runs on Ruby 2.7 to 3.4, with no gems.

require "json"

OUT = ARGV[0] or abort("usage: gvl_contention.rb OUT_DIR")

def spin(n)
  i = 0
  x = 0
  while i < n
    x = (x * 31 + i) & 0xffff
    i += 1
  end
  x
end

# Loops of about 0.1 ms, each counted in $progress: a gap of more than GAP
# between the ends of two loops in which the other CPU-bound threads made
# progress is a wait for the GVL (another thread ran: a GVL time slice is
# 100 ms). A long gap in which none did is the kernel running another
# process while the thread held the GVL: held. The rest of its time it held
# the GVL.
#
# The other threads' progress is read before and after the clock: a switch
# can come between any two steps of the loop, and one between reading the
# clock and reading the progress must not hide the wait (it belongs to the
# next gap, whose progress is then counted from before that clock read).
#
# The thread only records; the main thread writes (see below). A thread
# that wrote its own log would give up the GVL at each write (file writes
# release it), and from 3.3 on the GVL then goes straight back to the
# thread that held it: one thread would keep it 99% of the time and the
# others would log nothing but waits, measuring their logging, not the
# contention.
GAP = 0.010
$progress = Array.new(4, 0)    # loops thread N has run
$waits = Array.new(4) { [] }   # thread N's waits not yet written: [FROM, TO]
$seen = Array.new(4, 0.0)      # the end of thread N's last loop
$naps = Array.new(4) { [] }    # thread N's naps not yet written: [FROM, TO]
BUSY = File.join(OUT, "busy")
$busy = true                   # until ready

def others_progress(i)
  $progress.sum - $progress[i]
end

def crunch(n)
  i = n - 1
  prev = Time.now.to_f
  prev_before = others_progress(i)
  last = nil
  last_progress = 0
  loop do
    unless $busy
      # Napping: the thread sleeps (no wait for the GVL, no hold of it)
      # until the file is back, logged as a nap. The nap ends with its last
      # sleep; then the thread waits for the GVL like any other, and the
      # loop below logs that as a wait (from the sleep's end).
      from = Time.now.to_f
      until (($busy = File.exist?(BUSY)))
        last = Time.now.to_f
        last_progress = others_progress(i)
        sleep 0.01
      end
      if last
        prev = last + 0.01
        prev_before = last_progress
      else   # the file was back before the first sleep
        prev = Time.now.to_f
        prev_before = others_progress(i)
      end
      $naps[i] << [from, prev]
      last = nil
    end
    spin(2_000)
    before = others_progress(i)
    now = Time.now.to_f
    after = others_progress(i)
    $waits[i] << [prev, now] if now - prev >= GAP && after != prev_before
    $progress[i] += 1
    $seen[i] = now
    prev = now
    prev_before = before
  end
end

# OUT_DIR/cpu-N.log, written by the main thread every 50 ms: thread N's
# waits, "FROM TO", as they ended, then "seen T": every wait that ended
# before T, the end of its last loop, is in the file.
LOGS = (1..4).map do |n|
  f = File.open(File.join(OUT, "cpu-#{n}.log"), "w")
  f.sync = true
  f.write(format("start %.6f\n", Time.now.to_f))
  f
end

def flush_logs
  LOGS.each_with_index do |f, i|
    seen = $seen[i]
    # One C call takes what is there: a wait recorded meanwhile stays for
    # the next flush (its end is after `seen`).
    done = $waits[i].slice!(0, $waits[i].length)
    naps = $naps[i].slice!(0, $naps[i].length)
    f.write(done.map { |a, b| format("%.6f %.6f\n", a, b) }.join +
            naps.map { |a, b| format("nap %.6f %.6f\n", a, b) }.join + format("seen %.6f\n", seen))
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
loop do
  sleep 0.05
  flush_logs
  $busy = File.exist?(BUSY)
end
