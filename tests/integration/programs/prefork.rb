# Test target for the whole service (issue 26): a pre-forking server in
# miniature. The master forks two workers at once and a third when told
# to (OUT_DIR/fork-third appears: "during the run" of a sampler); each
# worker computes in a method of its own (work_one, work_two, work_three)
# on its main thread while OUT_DIR/busy exists, and sleeps in 10 ms naps
# otherwise, beside a named thread parked in sleep and one with a
# 110-character name parked in Thread.stop; the master computes a little
# in master_tick and sleeps between ticks. (A test creates OUT_DIR/busy
# around the checks that sample the workers: computing all along, the two
# workers kept both of CI's CPUs busy through every check, most of which
# read threads and cores that need no computing.)
#
#   ruby prefork.rb OUT_DIR
#
# Each process names itself as puma does, by a title set with $0 that
# holds '/' and spaces ("prefork 1.0 (tcp://127.0.0.1:9292) [app]",
# "prefork: cluster worker one: MASTER [app]"), and records its own view
# in OUT_DIR/<role>.json: that title (Ruby's $0), its pid, its parent's, Thread.main's native_thread_id as Ruby keeps it (3.1+; in 3.1
# and 3.2 a forked child's main thread keeps its parent's), its threads'
# names, and its CPU time per method (thread CPU clock) in <role>.cpu, a
# line "REALTIME SECONDS" every 50 ms. OUT_DIR/ready appears once the
# master and its first two workers have written theirs; OUT_DIR/third.json
# once the third has. A worker exits when its master is gone (it polls
# its parent), so killing the master ends them all. Runs on Ruby 2.7 to
# 3.4, with no gems.

require "json"

OUT = ARGV[0] or abort("usage: prefork.rb OUT_DIR")
BUSY = File.join(OUT, "busy")

def cpu_now
  Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
end

def record(role, extra = {})
  main_tid = Thread.main.respond_to?(:native_thread_id) ? Thread.main.native_thread_id : nil
  doc = {"role" => role, "title" => $0, "pid" => Process.pid, "ppid" => Process.ppid, "ruby_version" => RUBY_VERSION,
         "time" => Time.now.to_f,
         "ruby_main_native_tid" => main_tid,
         "threads" => Thread.list.map { |t| {"name" => t.name, "main" => t == Thread.main} }}.merge(extra)
  tmp = File.join(OUT, "#{role}.json.tmp")
  File.write(tmp, JSON.generate(doc))
  File.rename(tmp, File.join(OUT, "#{role}.json"))
end

# Plain integer loops: no allocation, so no GC.
def spin(n)
  i = 0
  x = 0
  while i < n
    x = (x * 31 + i) & 0xffff
    i += 1
  end
  x
end

def work_one; spin(60_000); end
def work_two; spin(60_000); end
def work_three; spin(60_000); end
def master_tick; spin(20_000); end

def worker(role, method_name, master)
  $0 = "prefork: cluster worker #{role}: #{master} [app]"
  parked = Thread.new { sleep }
  parked.name = "#{role}-parked"
  # A name longer than any column (`ruby threads` must keep its columns).
  long = Thread.new { Thread.stop }
  long.name = "#{role}-a-thread-whose-name-is-longer-than-any-column-" + "0123456789" * 6
  # Compute only once both are parked, as a server's worker starts its
  # helpers before it serves: a new thread waits for the GVL, which the
  # computing thread would hold for up to 100 ms.
  deadline = Time.now + 10
  Thread.pass until [parked, long].all? { |t| t.status == "sleep" } || Time.now > deadline
  log = File.open(File.join(OUT, "#{role}.cpu"), "a")
  log.sync = true
  record(role)
  spent = 0.0
  last_log = 0.0
  busy = File.exist?(BUSY)
  loop do
    if busy
      t0 = cpu_now
      send(method_name)
      spent += cpu_now - t0
    else
      sleep 0.01
      busy = File.exist?(BUSY)
    end
    now = Time.now.to_f
    if now - last_log >= 0.05
      log.write(format("%.6f %.9f\n", now, spent))
      last_log = now
      busy = File.exist?(BUSY)
      exit!(0) if Process.ppid != master
    end
  end
end

$0 = "prefork 1.0 (tcp://127.0.0.1:9292) [app]"
master = Process.pid
pids = {}
pids["one"] = fork { worker("one", :work_one, master) }
pids["two"] = fork { worker("two", :work_two, master) }
Signal.trap("TERM") { pids.each_value { |p| Process.kill("KILL", p) rescue nil }; exit!(0) }

deadline = Time.now + 60
until %w[one two].all? { |r| File.exist?(File.join(OUT, "#{r}.json")) }
  abort("workers never recorded themselves") if Time.now > deadline
  sleep 0.01
end
record("master", "workers" => pids)
File.write(File.join(OUT, "ready"), "")

third = File.join(OUT, "fork-third")
loop do
  master_tick
  sleep 0.02
  if !pids["three"] && File.exist?(third)
    pids["three"] = fork { worker("three", :work_three, master) }
  end
  # Reap workers that died (a test may kill one mid-sample).
  begin
    while (gone = Process.wait(-1, Process::WNOHANG))
      pids.delete_if { |_, p| p == gone }
    end
  rescue Errno::ECHILD
  end
end
