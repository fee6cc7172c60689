# encoding: utf-8
# Test target for `ruby bt`: parks named threads in known situations, asks
# Ruby itself for each thread's backtrace_locations, writes them as JSON, and
# then stays parked so a debugger can attach (or gcore it) and compare.
#
#   ruby bt_scenarios.rb OUT_DIR
#
# Writes OUT_DIR/expected.json then OUT_DIR/ready (containing the pid).
# Runs unchanged on Ruby 2.7 to 3.4 and uses no gems (json is not always
# installed with a minimal 2.7 build, so JSON is written by hand).

OUT = ARGV[0] or abort("usage: bt_scenarios.rb OUT_DIR")
$parked = Queue.new

def park_forever
  $parked << Thread.current
  sleep
end

# --- nested blocks, define_method, method_missing --------------------------
class Widget
  def spin(n)
    [n].each do |a|
      1.times do
        yield a
      end
    end
  end

  define_method(:defined_spin) do |&blk|
    spin(1) { blk.call }
  end

  def method_missing(name, *args)
    if name == :ghost_method
      defined_spin { park_forever }
    else
      super
    end
  end

  def respond_to_missing?(name, include_private = false)
    name == :ghost_method || super
  end
end

module Helpers
  def self.yield_to
    yield
  end
end

# --- C frames calling back into Ruby ---------------------------------------
def cfunc_callbacks
  [3, 1, 2].sort_by do |x|
    [x].each do |y|
      2.times { |i| park_forever if y == 3 && i == 1 }
    end
    x
  end
end

# --- rescue / ensure / class bodies -----------------------------------------
def in_rescue
  raise ArgumentError, "boom"
rescue ArgumentError
  Helpers.yield_to { park_forever }
end

def in_ensure
  begin
    1 + 1
  ensure
    catch(:never) { park_forever }
  end
end

# --- deep recursion ----------------------------------------------------------
def recurse(n)
  if n.zero?
    park_forever
  else
    recurse(n - 1)
  end
end

# --- fibers and external enumerators ---------------------------------------
def fiber_body
  Fiber.new do
    inner = 42
    Helpers.yield_to { park_forever if inner }
  end.resume
end

def enumerator_body
  e = Enumerator.new do |y|
    y << 1
    park_forever
  end
  e.next
  e.next
end

# --- non-ASCII and very long names -------------------------------------------
def ünïcödé_方法
  park_forever
end

LONG_NAME = ("very_long_method_name_" * 12) + "end"
Object.send(:define_method, LONG_NAME) { ünïcödé_方法 }

# A file with a non-ASCII path, required at run time.
require "tmpdir"
unicode_dir = File.join(OUT, "données_ファイル")
Dir.mkdir(unicode_dir) unless Dir.exist?(unicode_dir)
unicode_file = File.join(unicode_dir, "モジュール.rb")
File.write(unicode_file, <<~RUBY)
  # encoding: utf-8
  module Ünicode
    def self.wait_here
      yield
    end
  end
RUBY
require unicode_file

# --- a native thread that never runs Ruby -----------------------------------
# pthread_create(pause) through Fiddle: a debugger thread with no Ruby
# thread behind it, for `ruby bt` on a non-Ruby thread. Optional: a minimal
# build may lack fiddle.
begin
  require "fiddle"
  libc = Fiddle.dlopen(nil)
  pthread_create = Fiddle::Function.new(libc["pthread_create"],
                                        [Fiddle::TYPE_VOIDP] * 4, Fiddle::TYPE_INT)
  tid_buf = Fiddle::Pointer.malloc(8)
  pthread_create.call(tid_buf, nil, libc["pause"], nil)
  File.write(File.join(OUT, "native_thread"), "1")
rescue LoadError, Fiddle::DLError
  nil
end

# --- synchronisation primitives --------------------------------------------
HELD = Mutex.new
QUEUE = Queue.new
CV_MUTEX = Mutex.new
CV = ConditionVariable.new
READER, WRITER = IO.pipe

threads = []
spawn = lambda do |name, &body|
  t = Thread.new do
    Thread.current.name = name
    body.call
  end
  threads << t
  t
end

HELD.lock # held by main for ever, so "mutex" blocks in Mutex#lock

spawn.call("nested") { Widget.new.ghost_method }
spawn.call("cfuncs") { cfunc_callbacks }
spawn.call("sleeper") { sleep }
spawn.call("queue") { QUEUE.pop }
spawn.call("mutex") { HELD.lock }
spawn.call("condvar") { CV_MUTEX.synchronize { CV.wait(CV_MUTEX) } }
spawn.call("io") { READER.read }
spawn.call("fiber") { fiber_body }
spawn.call("enumerator") { enumerator_body }
spawn.call("deep") { recurse(5000) }
spawn.call("eval") { eval("def evald(x)\n  Helpers.yield_to { park_forever }\nend\nevald(1)", binding, "evaluated/code.rb", 100) }
spawn.call("rescue") { in_rescue }
spawn.call("ensure") { in_ensure }
spawn.call("class-body") { class ParkedInBody; Ünicode.wait_here { park_forever }; end }
spawn.call("unicode-名前") { send(LONG_NAME) }

# --- a second ractor (3.0+) -------------------------------------------------
# Thread.list and backtrace_locations only see the current ractor, so the
# ractor records its own two threads and sends the JSON to the main ractor.
def ractor_wait(n)
  sleep
end

RACTOR = if defined?(Ractor)
  Warning[:experimental] = false if Warning.respond_to?(:[]=)
  Ractor.new do
    Thread.current.name = "ractor-main"
    me = Thread.current
    worker = Thread.new { Thread.current.name = "ractor-worker"; [7].each { |n| ractor_wait(n) } }
    Thread.new do
      sleep 0.05 until worker.status == "sleep" && me.status == "sleep"
      sleep 0.2
      docs = [me, worker].map do |t|
        frames = t.backtrace_locations.map do |l|
          [l.label, l.path, l.absolute_path, l.lineno]
        end
        [t.name, t.status, frames]
      end
      Ractor.yield(Marshal.dump(docs))
    end
    sleep
  end
end

def json_str(s)
  return "null" if s.nil?
  s = s.to_s.dup.force_encoding(Encoding::UTF_8)
  s = s.scrub("\uFFFD") unless s.valid_encoding?
  out = +'"'
  s.each_char do |c|
    out << case c
           when '"' then '\\"'
           when "\\" then "\\\\"
           when "\n" then "\\n"
           else c.ord < 0x20 ? format("\\u%04x", c.ord) : c
           end
  end
  out << '"'
end

def wait_parked(threads)
  deadline = Time.now + 60
  # Each parking thread announces itself; the others are checked by status.
  loop do
    waiting = threads.reject { |t| t.status == "sleep" }
    break if waiting.empty?
    abort("threads never parked: #{waiting.map(&:name).join(', ')}") if Time.now > deadline
    sleep 0.05
  end
  sleep 0.3 # let every thread settle inside its blocking call
end

recorder = Thread.new do
  Thread.current.name = "rbpeek-recorder"
  # the ten threads that park through park_forever, plus the main thread
  expected_parked = %w[nested cfuncs fiber enumerator deep eval rescue ensure class-body unicode-名前].size + 1
  expected_parked.times { $parked.pop }
  wait_parked(threads + [Thread.main])
  ractor_docs = []
  if RACTOR
    Marshal.load(RACTOR.take).each do |name, status, frames|
      fj = frames.map do |label, path, abs, lineno|
        %({"label": #{json_str(label)}, "path": #{json_str(path)}, "absolute_path": #{json_str(abs)}, "lineno": #{lineno}})
      end
      ractor_docs << %({"name": #{json_str(name)}, "main": false, "status": #{json_str(status)}, "frames": [#{fj.join(",\n  ")}]})
    end
  end
  docs = (threads + [Thread.main]).map do |t|
    frames = t.backtrace_locations.map do |l|
      %({"label": #{json_str(l.label)}, "path": #{json_str(l.path)}, "absolute_path": #{json_str(l.absolute_path)}, "lineno": #{l.lineno}})
    end
    %({"name": #{json_str(t == Thread.main ? nil : t.name)}, "main": #{t == Thread.main}, "status": #{json_str(t.status)}, "frames": [#{frames.join(",\n  ")}]})
  end
  File.write(File.join(OUT, "expected.json.tmp"),
             %({"ruby_version": #{json_str(RUBY_VERSION)}, "pid": #{Process.pid}, "threads": [#{(docs + ractor_docs).join(",\n")}]}\n))
  File.rename(File.join(OUT, "expected.json.tmp"), File.join(OUT, "expected.json"))
  File.write(File.join(OUT, "ready"), Process.pid.to_s)
end

def main_park
  park_forever # the recorder reads the main thread's stack while it sleeps here
end

main_park
