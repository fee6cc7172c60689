# Test target for thread states (issues 26, 35): 4 CPU-bound threads
# contend for one GVL; 4 threads are blocked: in sleep, Queue#pop,
# Mutex#lock and a pipe's read. Each CPU-bound thread keeps its own CPU
# clock (CLOCK_THREAD_CPUTIME_ID) with the wall-clock time it read it,
# which the main thread logs; the test reads the kernel's view of each
# thread itself (test_thread_states.py).
#
#   ruby gvl_contention.rb OUT_DIR
#
# OUT_DIR/cpu.log: every 20 ms, each CPU-bound thread's last reading,
# "cpu N WALL CPU" (seconds): its CPU time was CPU at WALL, and stays so
# until it runs again (a thread waiting for the GVL uses no CPU), so the
# CPU time it used between two moments is the difference of the readings
# logged before each (to a loop's length, 0.1 ms). Naps are logged too,
# "nap N FROM TO": once ready, the CPU-bound threads compute only while
# OUT_DIR/busy exists (a test creates it around each run it checks:
# harness.Target.computing) and nap 10 ms at a time otherwise; a nap in a
# sampled window would make the thread's figures no contention's.
# OUT_DIR/expected.json names the threads; OUT_DIR/ready appears once every
# thread runs. Runs on Ruby 2.7 to 3.4, with no gems.

require "json"

OUT = ARGV[0] or abort("usage: gvl_contention.rb OUT_DIR")
BUSY = File.join(OUT, "busy")
$busy = true                    # until ready
$reading = Array.new(4) { [Time.now.to_f, 0.0] }   # thread N's [WALL, CPU]
$naps = Array.new(4) { [] }     # thread N's naps not yet logged: [FROM, TO]

def spin(n)
  i = 0
  x = 0
  while i < n
    x = (x * 31 + i) & 0xffff
    i += 1
  end
  x
end

def crunch(n)
  i = n - 1
  loop do
    unless $busy
      from = Time.now.to_f
      sleep 0.01 until (($busy = File.exist?(BUSY)))
      $naps[i] << [from, Time.now.to_f]
    end
    spin(2_000)
    # One array, swapped whole: the main thread never sees half a reading.
    $reading[i] = [Time.now.to_f, Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)]
  end
end

cpu = 4.times.map do |i|
  t = Thread.new { crunch(i + 1) }
  t.name = "cpu-#{i + 1}"
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
                          "cpu" => cpu.map(&:name), "blocked" => blocked.map(&:name)}))
LOG = File.open(File.join(OUT, "cpu.log"), "w")
LOG.sync = true
File.write(File.join(OUT, "ready"), "")
loop do
  sleep 0.02
  lines = $reading.each_with_index.map { |(wall, c), i| format("cpu %d %.6f %.6f\n", i + 1, wall, c) }
  $naps.each_with_index do |naps, i|
    naps.slice!(0, naps.length).each { |a, b| lines << format("nap %d %.6f %.6f\n", i + 1, a, b) }
  end
  LOG.write(lines.join)
  $busy = File.exist?(BUSY)
end
