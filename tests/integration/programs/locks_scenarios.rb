# encoding: utf-8
# Test target for `ruby threads` and `ruby locks`: parks named threads in
# known lock situations, all in one process, records what Ruby itself knows
# about them, and stays parked so a debugger can attach (or gcore it).
#
#   ruby locks_scenarios.rb OUT_DIR [stuck|healthy]
#
# (or the scenario in $RBPEEK_LOCKS_SCENARIO).
# Default ("stuck"): a two-Mutex deadlock, a three-thread Mutex cycle, a
# Thread#join cycle, a thread joining a deadlocked thread, a thread blocked
# on a Mutex whose owner sleeps (no cycle), Queue / SizedQueue /
# ConditionVariable waiters, a Monitor entered twice with a waiter, an IO
# reader, Thread.stop, timed and untimed sleeps, a timed join, and a Mutex
# locked by a Fiber that has since finished (3.x: no live fiber can ever
# unlock it; 2.7: the thread owns it).
#
# "healthy": nothing can deadlock: sleepers, Queue waiters, a Mutex held by
# a sleeper with a waiter, a join chain ending in a sleeper, a timed join
# cycle, and a thread spinning on the CPU (it holds the GVL).
#
# The main thread sleeps in plain Kernel#sleep, which Ruby's own deadlock
# check does not count, so Ruby never aborts the process with "No live
# threads left. Deadlock?" however stuck the other threads are.
#
# Writes OUT_DIR/expected.json then OUT_DIR/ready. Identities are recorded
# the way Ruby sees them: object addresses from ObjectSpace.dump, and for
# each Mutex the thread that owns it (Mutex#owned? asked inside the owner).
# JSON is written by hand: a minimal 2.7 build may lack the json gem.

require "objspace"
require "monitor"
require "fiber" # Fiber#alive? on 2.7

OUT = ARGV[0] or abort("usage: locks_scenarios.rb OUT_DIR [stuck|healthy]")
SCENARIO = ARGV[1] || ENV["RBPEEK_LOCKS_SCENARIO"] || "stuck"

def json(v)
  case v
  when nil then "null"
  when true, false, Integer then v.to_s
  when Symbol then json(v.to_s)
  when String
    out = +'"'
    v.each_char do |c|
      out << case c
             when '"' then '\\"'
             when "\\" then "\\\\"
             when "\n" then "\\n"
             else c.ord < 0x20 ? format("\\u%04x", c.ord) : c
             end
    end
    out << '"'
  when Array then "[" + v.map { |x| json(x) }.join(", ") + "]"
  when Hash then "{" + v.map { |k, x| "#{json(k.to_s)}: #{json(x)}" }.join(",\n ") + "}"
  else raise "cannot encode #{v.class}"
  end
end

def address(obj)
  ObjectSpace.dump(obj)[/"address":"(0x[0-9a-f]+)"/, 1] or raise "no address for #{obj.inspect}"
end

# What Ruby knows, filled in as the scenarios are set up.
EXPECT_LOCK = Mutex.new
$mutexes = {}   # role => {"address", "owner" (thread name), "waiters" => [names]}
$threads = {}   # name => {"wait" => {...}, "holds" => [roles]}
$deadlocks = [] # [[thread names in waits-for order]]
$orphans = []   # [thread names waiting on what no live thread can release]
$behind = []    # [thread names stuck behind a deadlock]
$all = []

def record_thread(name, wait, holds = [])
  EXPECT_LOCK.synchronize { $threads[name] = {"wait" => wait, "holds" => holds} }
end

def record_mutex(role, mutex, owner, waiters)
  $mutexes[role] = {"address" => address(mutex), "owner" => owner, "waiters" => waiters}
end

# Inside the owner: proves with Ruby's own Mutex#owned? that it holds them.
def assert_owned(*mutexes)
  mutexes.each { |m| m.owned? or abort("#{Thread.current.name}: does not own #{m.inspect}") }
end

# The kernel's TID of the calling thread (Thread#native_thread_id is 3.1+).
def my_tid
  File.readlink("/proc/thread-self")[/\d+\z/].to_i
end
$tids = {"<main>" => my_tid}

def spawn(name, &body)
  t = Thread.new do
    Thread.current.name = name
    Thread.current.report_on_exception = true
    tid = my_tid
    EXPECT_LOCK.synchronize { $tids[name] = tid }
    body.call
  end
  $all << t
  t
end

# Barrier built on Queue#size (thread safe, never blocks).
def arrive_and_wait(queue, n)
  queue << 1
  sleep 0.01 until queue.size >= n
end

def stuck_scenarios
  # --- classic two-Mutex deadlock ---------------------------------------------
  a = Mutex.new
  b = Mutex.new
  bar2 = Queue.new
  w1 = spawn("worker-1") { a.synchronize { assert_owned(a); arrive_and_wait(bar2, 2); b.synchronize {} } }
  w2 = spawn("worker-2") { b.synchronize { assert_owned(b); arrive_and_wait(bar2, 2); a.synchronize {} } }
  record_mutex("A", a, "worker-1", ["worker-2"])
  record_mutex("B", b, "worker-2", ["worker-1"])
  record_thread("worker-1", {"kind" => "mutex", "mutex" => "B"}, ["A"])
  record_thread("worker-2", {"kind" => "mutex", "mutex" => "A"}, ["B"])
  $deadlocks << %w[worker-1 worker-2]

  # --- a thread joining a deadlocked thread: stuck behind the deadlock -------
  spawn("joiner") { w2.join }
  record_thread("joiner", {"kind" => "join", "target" => "worker-2", "timeout" => false})
  $behind << "joiner"

  # --- three-thread Mutex cycle -------------------------------------------------
  m = [Mutex.new, Mutex.new, Mutex.new]
  bar3 = Queue.new
  3.times do |i|
    first, second = m[i], m[(i + 1) % 3]
    spawn("cycle-#{i + 1}") do
      first.synchronize { assert_owned(first); arrive_and_wait(bar3, 3); second.synchronize {} }
    end
  end
  3.times do |i|
    record_mutex("C#{i + 1}", m[i], "cycle-#{i + 1}", ["cycle-#{(i + 2) % 3 + 1}"])
    record_thread("cycle-#{i + 1}", {"kind" => "mutex", "mutex" => "C#{(i + 1) % 3 + 1}"}, ["C#{i + 1}"])
  end
  $deadlocks << %w[cycle-1 cycle-2 cycle-3]

  # --- Thread#join cycle ------------------------------------------------------------
  peers = Queue.new
  ja = spawn("join-a") { peers.pop.join }
  jb = spawn("join-b") { sleep 0.01 until ja; ja.join }
  peers << jb
  record_thread("join-a", {"kind" => "join", "target" => "join-b", "timeout" => false})
  record_thread("join-b", {"kind" => "join", "target" => "join-a", "timeout" => false})
  $deadlocks << %w[join-a join-b]

  # --- blocked on a Mutex whose owner sleeps: no cycle ------------------------------
  held = Mutex.new
  got = Queue.new
  spawn("holder") { held.synchronize { assert_owned(held); got << 1; sleep } }
  got.pop
  spawn("blocked-on-sleeper") { held.synchronize {} }
  record_mutex("HELD", held, "holder", ["blocked-on-sleeper"])
  record_thread("holder", {"kind" => "sleep", "timeout" => false}, ["HELD"])
  record_thread("blocked-on-sleeper", {"kind" => "mutex", "mutex" => "HELD"})

  # --- Queue, SizedQueue, ConditionVariable ------------------------------------------
  q = Queue.new
  spawn("queue-pop-1") { q.pop }
  spawn("queue-pop-2") { q.pop }
  sq_full = SizedQueue.new(1)
  sq_full << :item
  spawn("sized-push") { sq_full << :more }
  sq_empty = SizedQueue.new(2)
  spawn("sized-pop") { sq_empty.pop }
  cv_mutex = Mutex.new
  cv = ConditionVariable.new
  spawn("cv-wait") { cv_mutex.synchronize { cv.wait(cv_mutex) } }
  record_thread("queue-pop-1", {"kind" => "queue", "object" => address(q)})
  record_thread("queue-pop-2", {"kind" => "queue", "object" => address(q)})
  record_thread("sized-push", {"kind" => "sized_queue_push", "object" => address(sq_full)})
  record_thread("sized-pop", {"kind" => "sized_queue", "object" => address(sq_empty)})
  record_thread("cv-wait", {"kind" => "condvar", "object" => address(cv), "mutex" => address(cv_mutex)})
  record_mutex("CVM", cv_mutex, nil, [])

  # --- Monitor entered twice, and a thread waiting to enter ---------------------------
  mon = Monitor.new
  mon_mutex = ObjectSpace.reachable_objects_from(mon).find { |o| o.is_a?(Mutex) } or abort("no Monitor mutex")
  entered = Queue.new
  spawn("mon-holder") { mon.synchronize { mon.synchronize { assert_owned(mon_mutex); entered << 1; sleep } } }
  entered.pop
  spawn("mon-wait") { mon.synchronize {} }
  record_mutex("MON", mon_mutex, "mon-holder", ["mon-wait"])
  $mutexes["MON"]["monitor"] = address(mon)
  $mutexes["MON"]["monitor_count"] = 2
  record_thread("mon-holder", {"kind" => "sleep", "timeout" => false}, ["MON"])
  record_thread("mon-wait", {"kind" => "mutex", "mutex" => "MON", "monitor" => address(mon)})

  # --- IO, sleeps, Thread.stop, timed join ------------------------------------------
  r, w = IO.pipe
  $keep = [r, w]
  spawn("io-read") { r.read }
  record_thread("io-read", {"kind" => "io", "object" => address(r), "fd" => r.fileno})
  sleeper = spawn("sleeper") { sleep }
  record_thread("sleeper", {"kind" => "sleep", "timeout" => false})
  spawn("napper") { sleep 100_000 }
  record_thread("napper", {"kind" => "sleep", "timeout" => true})
  spawn("stopped") { Thread.stop }
  record_thread("stopped", {"kind" => "stop"})
  spawn("timed-join") { sleeper.join(100_000) }
  record_thread("timed-join", {"kind" => "join", "target" => "sleeper", "timeout" => true})

  # --- a Mutex locked by a Fiber that has finished ------------------------------------
  orphan = Mutex.new
  $orphan_fiber = Fiber.new { orphan.lock; :done } # kept referenced: the Mutex does not mark it
  $orphan_fiber.resume
  $orphan_fiber.alive? and abort("the orphaning fiber is still alive")
  spawn("orphan-wait") { orphan.lock }
  if orphan.owned?
    # Ruby 2.7: Mutexes belong to threads, so the main thread owns it.
    record_mutex("ORPHAN", orphan, "<main>", ["orphan-wait"])
    $main_holds = ["ORPHAN"]
  else
    # 3.x: Mutexes belong to fibers; its fiber is dead and nobody can unlock it.
    record_mutex("ORPHAN", orphan, nil, ["orphan-wait"])
    $mutexes["ORPHAN"]["dead_fiber_of"] = "<main>"
    $orphans << "orphan-wait"
    $main_holds = []
  end
  record_thread("orphan-wait", {"kind" => "mutex", "mutex" => "ORPHAN"})
end

def healthy_scenarios
  held = Mutex.new
  got = Queue.new
  spawn("holder") { held.synchronize { assert_owned(held); got << 1; sleep } }
  got.pop
  spawn("blocked-on-sleeper") { held.synchronize {} }
  record_mutex("HELD", held, "holder", ["blocked-on-sleeper"])
  record_thread("holder", {"kind" => "sleep", "timeout" => false}, ["HELD"])
  record_thread("blocked-on-sleeper", {"kind" => "mutex", "mutex" => "HELD"})

  q = Queue.new
  spawn("queue-pop-1") { q.pop }
  spawn("queue-pop-2") { q.pop }
  record_thread("queue-pop-1", {"kind" => "queue", "object" => address(q)})
  record_thread("queue-pop-2", {"kind" => "queue", "object" => address(q)})

  tail = spawn("chain-tail") { sleep }
  mid = spawn("chain-mid") { tail.join }
  spawn("chain-head") { mid.join }
  record_thread("chain-tail", {"kind" => "sleep", "timeout" => false})
  record_thread("chain-mid", {"kind" => "join", "target" => "chain-tail", "timeout" => false})
  record_thread("chain-head", {"kind" => "join", "target" => "chain-mid", "timeout" => false})

  # Each waits for the other, but with a timeout: not a deadlock.
  peers = Queue.new
  ta = spawn("timed-a") { peers.pop.join(100_000) }
  tb = spawn("timed-b") { sleep 0.01 until ta; ta.join(100_000) }
  peers << tb
  record_thread("timed-a", {"kind" => "join", "target" => "timed-b", "timeout" => true})
  record_thread("timed-b", {"kind" => "join", "target" => "timed-a", "timeout" => true})

  $spinner = spawn("spinner") { i = 0; loop { i += 1 } }
  record_thread("spinner", {"kind" => "running"})
  $main_holds = []
end

SCENARIO == "healthy" ? healthy_scenarios : stuck_scenarios

# Wait until every thread (but the spinner) has parked in its blocking call.
deadline = Time.now + 60
loop do
  waiting = $all.reject { |t| t == $spinner || t.status == "sleep" }
  break if waiting.empty?
  abort("threads never parked: #{waiting.map { |t| "#{t.name}=#{t.status.inspect}" }.join(', ')}") if Time.now > deadline
  sleep 0.05
end
sleep 0.3 # let each thread settle inside its blocking call

# Every thread's innermost frame, as Ruby reports it (to check the top frame).
$all.each do |t|
  next if t == $spinner
  loc = t.backtrace_locations(0, 1)&.first
  $threads[t.name]["top"] = loc && {"label" => loc.label, "path" => loc.path, "lineno" => loc.lineno}
  $threads[t.name]["status"] = t.status
end
record_thread("<main>", {"kind" => "sleep", "timeout" => false}, $main_holds)
$threads.each { |name, t| t["tid"] = $tids.fetch(name) }

doc = {
  "ruby_version" => RUBY_VERSION,
  "pid" => Process.pid,
  "scenario" => SCENARIO,
  "threads" => $threads,
  "mutexes" => $mutexes,
  "deadlocks" => $deadlocks,
  "orphans" => $orphans,
  "behind" => $behind,
  "gvl" => SCENARIO == "healthy" ? "spinner" : nil,
}
File.write(File.join(OUT, "expected.json.tmp"), json(doc) + "\n")
File.rename(File.join(OUT, "expected.json.tmp"), File.join(OUT, "expected.json"))
File.write(File.join(OUT, "ready"), Process.pid.to_s)

def main_park
  sleep # plain sleep: not counted by Ruby's deadlock check
end

main_park
