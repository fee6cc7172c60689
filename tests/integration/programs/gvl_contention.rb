# Test target for thread states (issues 26, 35, 37): 4 CPU-bound threads
# contend for one GVL; two threads wait for it after each short call that
# releases it ("napper": sleep 1 ms; "reader": a 1-byte read of /dev/zero);
# 4 threads are blocked: in sleep, Queue#pop, Mutex#lock and a pipe's read.
# Each CPU-bound thread reads its own CPU clock (CLOCK_THREAD_CPUTIME_ID)
# with the wall-clock time every 0.5 ms it runs, which the main thread logs;
# the napper counts its naps; the test reads the kernel's view of each
# thread itself (test_thread_states.py).
#
#   ruby gvl_contention.rb OUT_DIR
#
# OUT_DIR/cpu.log, written every 20 ms the main thread gets the GVL:
# "cpu N WALL CPU" (seconds): CPU-bound thread N's CPU time was CPU at WALL;
# "naps WALL COUNT": the napper had begun COUNT naps of 1 ms by WALL (its
# time asleep; the rest of its time it waits for the GVL, or runs);
# "nap N FROM TO": once ready, the threads other than the blocked ones work
# only while OUT_DIR/busy exists (a test creates it around each run it
# checks: harness.Target.computing) and nap 10 ms at a time otherwise; a nap
# in a sampled window would make the thread's figures no contention's.
# OUT_DIR/expected.json names the threads; OUT_DIR/ready appears once every
# thread runs. Runs on Ruby 2.7 to 3.4, with no gems.

require "json"

OUT = ARGV[0] or abort("usage: gvl_contention.rb OUT_DIR")
BUSY = File.join(OUT, "busy")
$busy = true                    # until ready
$readings = Array.new(4) { [] } # thread N's [WALL, CPU] not yet logged
$naps = Array.new(6) { [] }     # thread N's naps not yet logged: [FROM, TO] (5: napper, 6: reader)
$napped = [[Time.now.to_f, 0]]  # the napper's [WALL, COUNT] not yet logged

def spin(n)
  i = 0
  x = 0
  while i < n
    x = (x * 31 + i) & 0xffff
    i += 1
  end
  x
end

# Until busy: 10 ms naps, logged as thread i's.
def idle(i)
  return if $busy
  from = Time.now.to_f
  sleep 0.01 until (($busy = File.exist?(BUSY)))
  $naps[i] << [from, Time.now.to_f]
end

def crunch(n)
  i = n - 1
  last = 0.0
  loop do
    idle(i)
    spin(2_000)
    now = Time.now.to_f
    next if now - last < 0.0005
    # Every 0.5 ms it runs: when it began and stopped running Ruby code
    # (the test's measure of when it held the GVL) is read to within that.
    # The main thread takes the array's entries from the front (Array#shift
    # and #<< under the GVL).
    $readings[i] << [now, Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)]
    last = now
  end
end

# 1 ms in sleep, then the wait for the GVL (a thread of Ruby's "sleep"
# status, woken, queued for the GVL): what a pool's thread woken for work does.
def nap_loop
  count = 0
  loop do
    idle(4)
    $napped << [Time.now.to_f, count += 1]
    sleep 0.001
  end
end

# A read that returns at once, then the wait for the GVL (a thread back from
# a blocking region, "stopped" for Ruby until it holds the GVL).
def read_loop
  File.open("/dev/zero") do |f|
    loop do
      idle(5)
      f.sysread(1)
    end
  end
end

cpu = 4.times.map do |i|
  t = Thread.new { crunch(i + 1) }
  t.name = "cpu-#{i + 1}"
  t
end
waiters = {"napper" => -> { nap_loop }, "reader" => -> { read_loop }}.map do |name, body|
  t = Thread.new(&body)
  t.name = name
  t
end
queue = Queue.new
mutex = Mutex.new
mutex.lock
rd, _wr = IO.pipe
blocked = {"sleep" => -> { sleep }, "queue-pop" => -> { queue.pop }, "mutex-lock" => -> { mutex.lock },
           "pipe-read" => -> { rd.read(1) }}.map do |name, body|
  t = Thread.new(&body)
  t.name = name
  t
end
sleep 0.2
File.write(File.join(OUT, "expected.json"),
           JSON.generate({"pid" => Process.pid, "ruby_version" => RUBY_VERSION,
                          "cpu" => cpu.map(&:name), "waiters" => waiters.map(&:name),
                          "blocked" => blocked.map(&:name)}))
LOG = File.open(File.join(OUT, "cpu.log"), "w")
LOG.sync = true
File.write(File.join(OUT, "ready"), "")
loop do
  sleep 0.02
  lines = []
  $readings.each_with_index do |r, i|
    r.shift(r.length).each { |wall, c| lines << format("cpu %d %.6f %.6f\n", i + 1, wall, c) }
  end
  $napped.shift($napped.length).each { |wall, n| lines << format("naps %.6f %d\n", wall, n) }
  $naps.each_with_index do |naps, i|
    naps.slice!(0, naps.length).each { |a, b| lines << format("nap %d %.6f %.6f\n", i + 1, a, b) }
  end
  LOG.write(lines.join)
  $busy = File.exist?(BUSY)
end
