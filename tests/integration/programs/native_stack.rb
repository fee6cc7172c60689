# Test target for `ruby bt --native` (docs/native.md): a thread whose stack
# goes Ruby -> C -> rb_yield -> Ruby -> C -> rb_thread_call_without_gvl ->
# a libc sleep (the native_ext extension, built for this Ruby beforehand
# into OUT_DIR by tests/integration/nativelib.py), parked there; and the
# main thread parked in Kernel#sleep. A recorder thread asks Ruby for both
# threads' backtrace_locations once they are parked, writes them, then ends.
#
#   ruby native_stack.rb OUT_DIR
#
# Writes OUT_DIR/expected.json then OUT_DIR/ready. Runs unchanged on Ruby
# 2.7 to 4.0, with no gems (JSON written by hand).

OUT = ARGV[0] or abort("usage: native_stack.rb OUT_DIR")
require File.join(OUT, "native_ext")

def helper
  NativeExt.inner
end

def run
  NativeExt.outer do
    helper
  end
end

def park_main
  sleep
end

require_relative "thread_record"

worker = Thread.new { run }
worker.name = "native-worker" if worker.respond_to?(:name=)
main = Thread.current

Thread.new do
  sleep 0.01 until NativeExt.parked == 1 && worker.status == "sleep" && main.status == "sleep"
  sleep 0.2 # both are inside their sleeps, not on their way in
  threads = [["main", main], ["native-worker", worker]]
  body = threads.map do |name, t|
    "{\"name\": #{json_str(name)}, \"tid\": #{tid_of(t)}, \"frames\": #{frames_json(t.backtrace_locations)}}"
  end
  File.write(File.join(OUT, "expected.json"),
             "{\"ruby_version\": #{json_str(RUBY_VERSION)}, \"pid\": #{Process.pid}, " \
             "\"threads\": [#{body.join(', ')}]}\n")
  File.write(File.join(OUT, "ready"), Process.pid.to_s)
end

park_main
