# Test target of it.arch_read (issue 39): run as an arm64 Ruby (Debian's
# ruby3.1 under qemu-aarch64), read on x86-64. Threads parked in C methods
# and in Ruby ones: "waiter" in Queue#pop, "sleeper" in Kernel#sleep under
# six Ruby frames, "locker" in ConditionVariable#wait inside
# Mutex#synchronize, the main thread in Kernel#sleep. Once they are parked,
# a recorder thread writes, with the GC disabled, the program's own view to
# OUT_DIR/expected.json: its platform and version; each thread's name,
# status, kernel thread id and backtrace_locations; how many ArchProbe
# objects live; one value's address (from ObjectSpace.dump) with its
# #inspect; what each thread waits on and holds, in the shape of
# locks_scenarios.rb's record ("locks": the Queue's and the
# ConditionVariable's addresses, the Queue's length and num_waiting, the
# Mutex unlocked while its locker waits, as Mutex#locked? says); and, last,
# ObjectSpace.count_objects and GC.stat taken together (with
# GC.latest_gc_info's state and GC.stress), so that what the recorder
# allocates after them is all they miss. Then OUT_DIR/ready (its pid), and
# it ends: the program stays parked with the four threads it has.
#
#   ruby arch_read.rb OUT_DIR
#
# No gems (Debian's ruby3.1 runs with --disable-gems under qemu): JSON
# written by hand.

OUT = ARGV[0] or abort("usage: arch_read.rb OUT_DIR")
require "objspace"
require_relative "thread_record"

class ArchProbe
  def initialize(i)
    @i = i
  end
end

PROBES = Array.new(1234) { |i| ArchProbe.new(i) }
VALUE = { name: "arm64", list: [1, 2.5, :sym, nil, true, "caf\u00e9"], range: (1..10), big: 2**80,
          probe: ArchProbe.new(7) }.freeze

parked = Queue.new
q = Queue.new
waiter = Thread.new do
  Thread.current.name = "waiter"
  parked << 1
  q.pop
end

def deep(n, parked)
  return deep(n - 1, parked) if n > 0
  parked << 1
  sleep
end

sleeper = Thread.new do
  Thread.current.name = "sleeper"
  deep(5, parked)
end

lock = Mutex.new
cond = ConditionVariable.new
locker = Thread.new do
  Thread.current.name = "locker"
  lock.synchronize do
    parked << 1
    cond.wait(lock)
  end
end

def thread_json(t, name)
  "{\"name\": #{json_str(name)}, \"main\": #{t == Thread.main}, \"status\": #{json_str(t.status)}, " \
    "\"tid\": #{tid_of(t)}, \"frames\": #{frames_json(t.backtrace_locations)}}"
end

def address(obj)
  ObjectSpace.dump(obj)[/"address":"(0x[0-9a-f]+)"/, 1] or abort("no address for #{obj.inspect}")
end

# What each thread waits on and holds, as locks_scenarios.rb records it
# (test_locks.py's checks read it): no thread holds a Mutex (the locker's
# is released inside ConditionVariable#wait: Mutex#locked? says so), no
# deadlock, and every thread asleep, so no GVL owner.
def locks_json(q, cond, lock)
  abort("the locker's Mutex is locked while it waits on its ConditionVariable") if lock.locked?
  queue = "{\"kind\": \"queue\", \"object\": \"#{address(q)}\", \"queue_length\": #{q.length}, " \
          "\"queue_waiters\": #{q.num_waiting}}"
  condvar = "{\"kind\": \"condvar\", \"object\": \"#{address(cond)}\", \"mutex\": \"#{address(lock)}\"}"
  asleep = "{\"kind\": \"sleep\", \"timeout\": false}"
  waits = { "waiter" => queue, "sleeper" => asleep, "locker" => condvar, "<main>" => asleep }
  "{\"threads\": {" + waits.map { |n, w| "#{json_str(n)}: {\"wait\": #{w}, \"holds\": []}" }.join(", ") + "}, " \
    "\"mutexes\": {\"LOCK\": {\"address\": \"#{address(lock)}\", \"owner\": null, \"waiters\": []}}, " \
    "\"deadlocks\": [], \"orphans\": [], \"behind\": [], \"gvl\": null}"
end

# Writes a Hash of Symbol => Integer as a JSON object, allocating only each
# number's String ("...".freeze and Symbol#name allocate nothing): it runs
# after count_objects and GC.stat.
def write_counts(out, counts)
  first = true
  counts.each do |k, v|
    out.write(first ? "{\"".freeze : ", \"".freeze)
    out.write(k.name)
    out.write("\": ".freeze)
    out.write(v)
    first = false
  end
end

# The recorder: once every thread is parked (the main one too), it writes
# the program's view and ends, so that the threads left are the program's.
main = Thread.current
Thread.new do
  Thread.current.name = "rbpeek-recorder"
  3.times { parked.pop }
  sleep 0.05 until [waiter, sleeper, locker, main].all? { |t| t.status == "sleep" }
  sleep 0.2 # inside their waits, not on their way in
  GC.start
  GC.disable
  threads = (Thread.list - [Thread.current]).map { |t| thread_json(t, t.name || (t == main ? "main" : "-")) }
  head = "{\"platform\": #{json_str(RUBY_PLATFORM)}, \"ruby_version\": #{json_str(RUBY_VERSION)}, " \
         "\"pid\": #{Process.pid}, \"threads\": [#{threads.join(', ')}], \"probes\": " \
         "#{ObjectSpace.each_object(ArchProbe).count}, \"value\": {\"address\": #{json_str(address(VALUE))}, " \
         "\"inspect\": #{json_str(VALUE.inspect)}}, \"locks\": #{locks_json(q, cond, lock)}, \"counts\": "
  out = File.open(File.join(OUT, "expected.json"), "w")
  out.write(head)
  # With the GC disabled, a heap with hardly a free slot would grow a page
  # for what is allocated below, and GC.stat's page counts would no longer
  # hold: fill the last page first (bounded), so there is room.
  20_000.times { break if GC.stat(:heap_free_slots) >= 300; Object.new }
  counts, stat = {}, {}
  ObjectSpace.count_objects(counts)
  GC.stat(stat)
  stress = GC.stress
  state = GC.latest_gc_info(:state)
  # last, into the Hashes filled above (their keys are there: nothing is
  # allocated between the two)
  ObjectSpace.count_objects(counts)
  GC.stat(stat)
  write_counts(out, counts)
  out.write("}, \"gc\": ".freeze)
  write_counts(out, stat)
  out.write(", \"state\": \"".freeze)
  out.write(state.name)
  out.write("\", \"stress\": ".freeze)
  out.write(stress)
  out.write("}}\n".freeze)
  out.close
  File.write(File.join(OUT, "ready"), Process.pid.to_s)
end
sleep
