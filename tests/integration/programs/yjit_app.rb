# Test target for rbpeek under YJIT: run as
#
#   ruby --yjit --yjit-call-threshold=1 yjit_app.rb OUT_DIR
#
# so that each method is compiled on its first call, before it parks.
# Threads park in Queue#pop and sleep called from JIT-compiled methods; one
# computes in a JIT-compiled loop with no calls in its body (hot_leaf, lines
# HOT_FIRST..HOT_LAST below, and HOT_END, its `end`, where Ruby puts its
# `leave`); one allocates. The parked threads' own
# backtrace_locations are written as OUT_DIR/expected.json (the shape of
# bt_scenarios.rb's), with whether YJIT is on, and the loop's lines; then
# OUT_DIR/ready. The computing threads compute only while OUT_DIR/busy
# exists (harness.Target.computing) and nap otherwise, so that the suite's
# other work keeps its CPU. No gems (json is written by hand).

OUT = ARGV[0] or abort("usage: yjit_app.rb OUT_DIR")
BUSY = File.join(OUT, "busy")
$parked = Queue.new
QUEUE = Queue.new

def park_in_queue(depth)
  return park_in_queue(depth - 1) if depth > 0
  $parked << Thread.current
  QUEUE.pop
end

def park_in_sleep(n)
  $parked << Thread.current
  sleep if n
end

def warm(n)
  x = 0
  n.times { |i| x += i }
  x
end

HOT_FIRST = __LINE__ + 2
def hot_leaf(n)
  i = 0
  s = 0
  while i < n
    s += i
    i += 1
  end
  s
end
HOT_LAST = __LINE__ - 2
HOT_END = __LINE__ - 2
HOT_CALL = File.readlines(__FILE__).index { |l| l.include?("# HOT_" + "CALL") } + 1

def compute
  hot_leaf(10)   # compiled before it is sampled
  loop do
    if File.exist?(BUSY)
      hot_leaf(2_000_000)   # HOT_CALL
    else
      sleep 0.01
    end
  end
end

def allocate
  keep = []
  loop do
    if File.exist?(BUSY)
      200.times { |i| keep << ("x" * (i % 64)) << [i, i] }
      keep.clear if keep.size > 50_000
    else
      sleep 0.01
    end
  end
end

# Each parking method runs once before: compiled (threshold 1) with its
# callers, so the threads park from JIT code.
warm(3)
park_in_sleep(nil)
$parked.pop

threads = []
spawn = lambda do |name, &body|
  t = Thread.new do
    Thread.current.name = name
    body.call
  end
  threads << t
  t
end

spawn.call("queue") { park_in_queue(3) }
spawn.call("sleeper") { park_in_sleep(true) }
spawn.call("queue-shallow") { park_in_queue(0) }
computing = [spawn.call("hot") { compute }, spawn.call("alloc") { allocate }]
parked = threads - computing

def json_str(s)
  return "null" if s.nil?
  out = +'"'
  s.to_s.each_char do |c|
    out << case c
           when '"' then '\\"'
           when "\\" then "\\\\"
           else c.ord < 0x20 ? format("\\u%04x", c.ord) : c
           end
  end
  out << '"'
end

Thread.new do
  Thread.current.name = "rbpeek-recorder"
  parked.size.times { $parked.pop }
  parked << Thread.main
  deadline = Time.now + 60
  sleep 0.05 until parked.all? { |t| t.status == "sleep" } || Time.now > deadline
  sleep 0.3 # each inside its blocking call
  docs = parked.map do |t|
    frames = t.backtrace_locations.map do |l|
      %({"label": #{json_str(l.label)}, "path": #{json_str(l.path)}, "absolute_path": #{json_str(l.absolute_path)}, "lineno": #{l.lineno}})
    end
    %({"name": #{json_str(t.name)}, "main": #{t == Thread.main},  "status": #{json_str(t.status)}, "frames": [#{frames.join(",\n  ")}]})
  end
  yjit = defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? "true" : "false"
  File.write(File.join(OUT, "expected.json"),
             %({"ruby_version": #{json_str(RUBY_VERSION)}, "yjit": #{yjit}, "hot": [#{HOT_FIRST}, #{HOT_LAST}], "hot_end": #{HOT_END}, "hot_call": #{HOT_CALL},\n) +
             %( "threads": [#{docs.join(",\n")}]}\n))
  File.write(File.join(OUT, "ready"), Process.pid.to_s)
  sleep
end
sleep
