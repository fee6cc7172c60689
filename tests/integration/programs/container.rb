# Test target for containers (issue 26): run in its own PID and mount
# namespaces (test_container.py starts it under unshare, from a Ruby whose
# files only its namespace sees). Records its own view, then parks:
#
#   ruby container.rb OUT_DIR
#
# OUT_DIR/expected.json: its pid as it knows it (1 or 2: the namespace's),
# Thread.main's native_thread_id where Ruby keeps one, RUBY_VERSION, and
# every thread's backtrace_locations (label, lineno). OUT_DIR/ready then.
# The main thread spins in work_inside (so a sampler sees it), a named
# thread sleeps. Runs on Ruby 2.7 to 3.4, with no gems.

require "json"

OUT = ARGV[0] or abort("usage: container.rb OUT_DIR")

def spin(n)
  i = 0
  x = 0
  while i < n
    x = (x * 31 + i) & 0xffff
    i += 1
  end
  x
end

def work_inside
  spin(50_000)
end

def park(depth)
  depth.zero? ? sleep : park(depth - 1)
end

parked = Thread.new { park(3) }
parked.name = "parked-inside"
sleep 0.1 until parked.status == "sleep"
threads = Thread.list.map do |t|
  {"name" => t.name, "main" => t == Thread.main,
   "frames" => (t == Thread.current ? [] : t.backtrace_locations.map { |l| {"label" => l.label, "lineno" => l.lineno} })}
end
File.write(File.join(OUT, "expected.json"),
           JSON.generate({"pid" => Process.pid, "ruby_version" => RUBY_VERSION, "threads" => threads,
                          "main_native_tid" => Thread.main.respond_to?(:native_thread_id) ? Thread.main.native_thread_id : nil}))
File.write(File.join(OUT, "ready"), "")
loop { work_inside }
