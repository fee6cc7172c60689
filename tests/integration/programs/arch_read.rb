# Test target of it.arch_read (issue 39): run as an arm64 Ruby (Debian's
# ruby3.1 under qemu-aarch64), read on x86-64. Threads parked in C methods
# and in Ruby ones: "waiter" in Queue#pop, "sleeper" in Kernel#sleep under
# six Ruby frames, "locker" in ConditionVariable#wait inside
# Mutex#synchronize, the main thread in Kernel#sleep. Once they are parked,
# a recorder thread writes, with the GC disabled, the program's own view to
# OUT_DIR/expected.json: its
# platform and version, each thread's name, status, kernel thread id and
# backtrace_locations, ObjectSpace.count_objects, how many ArchProbe
# objects live, and one value's address (from ObjectSpace.dump) with its
# #inspect; then OUT_DIR/ready (its pid), and ends: the program stays
# parked with the four threads it has.
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
  address = ObjectSpace.dump(VALUE)[/"address":"(0x[0-9a-f]+)"/, 1]
  head = "{\"platform\": #{json_str(RUBY_PLATFORM)}, \"ruby_version\": #{json_str(RUBY_VERSION)}, " \
         "\"pid\": #{Process.pid}, \"threads\": [#{threads.join(', ')}], \"probes\": " \
         "#{ObjectSpace.each_object(ArchProbe).count}, \"value\": {\"address\": #{json_str(address)}, " \
         "\"inspect\": #{json_str(VALUE.inspect)}}, \"counts\": {"
  counts = ObjectSpace.count_objects   # last: what the lines below allocate is all it misses
  File.write(File.join(OUT, "expected.json"), head + counts.map { |k, v| "\"#{k}\": #{v}" }.join(", ") + "}}\n")
  File.write(File.join(OUT, "ready"), Process.pid.to_s)
end
sleep
