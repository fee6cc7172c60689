# Test target for the native stack through YJIT's code (docs/native.md, "JIT
# code"): run with --yjit --yjit-call-threshold=1 (test_native_yjit.py sets
# RUBYOPT), so that every method is compiled at its first call and runs as
# JIT code before it parks:
#
#   - "yjit-queue" parks in Queue#pop, called from q_wait (JIT code);
#   - "yjit-sleep" parks in Kernel#sleep, called from nap (JIT code);
#   - the main thread parks in Kernel#sleep, called from park_main;
#   - "yjit-hot" computes in hot_leaf, a loop with no calls in its body,
#     called over and over by hot_outer, while OUT_DIR/busy exists, and
#     naps otherwise (a target that computed all along would keep a CPU busy
#     through every debugger start).
#
# A recorder thread asks Ruby for the parked threads' backtrace_locations
# once they are parked and writes them (with whether YJIT is on) to
# OUT_DIR/expected.json, then OUT_DIR/ready. No gems (JSON by hand).
#
#   ruby --yjit --yjit-call-threshold=1 native_yjit.rb OUT_DIR

OUT = ARGV[0] or abort("usage: native_yjit.rb OUT_DIR")
BUSY = File.join(OUT, "busy")

def q_wait(q)
  q.pop
end

def q_run(q)
  q_wait(q)
end

def nap
  sleep
end

def nap_run
  nap
end

def park_main
  sleep
end

def hot_leaf(n)
  i = 0
  s = 0
  while i < n
    s += i
    i += 1
  end
  s
end

def hot_outer
  k = 0
  while k < 200
    hot_leaf(20_000)
    k += 1
  end
end

def hot_run
  loop do
    if File.exist?(BUSY)
      hot_outer
    else
      sleep 0.01
    end
  end
end

require_relative "thread_record"

q = Queue.new
queue = Thread.new { q_run(q) }
queue.name = "yjit-queue"
sleeper = Thread.new { nap_run }
sleeper.name = "yjit-sleep"
hot = Thread.new { hot_run }
hot.name = "yjit-hot"
main = Thread.current

Thread.new do
  sleep 0.01 until queue.status == "sleep" && sleeper.status == "sleep" && main.status == "sleep"
  sleep 0.2 # all are inside their waits, not on their way in
  yjit = defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? "true" : "false"
  threads = [["main", main], ["yjit-queue", queue], ["yjit-sleep", sleeper]]
  body = threads.map do |name, t|
    "{\"name\": #{json_str(name)}, \"tid\": #{tid_of(t)}, \"frames\": #{frames_json(t.backtrace_locations)}}"
  end
  File.write(File.join(OUT, "expected.json"),
             "{\"ruby_version\": #{json_str(RUBY_VERSION)}, \"pid\": #{Process.pid}, \"yjit\": #{yjit}, " \
             "\"hot_tid\": #{tid_of(hot)}, \"threads\": [#{body.join(', ')}]}\n")
  File.write(File.join(OUT, "ready"), Process.pid.to_s)
end

park_main
