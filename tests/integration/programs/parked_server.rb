# Test and benchmark target for `ruby sample`'s stop modes: a server-like
# process of 16 threads, of which one computes and 15 are parked the ways a
# server's threads are (sleep, Queue#pop, Mutex#lock, a pipe read), each
# under a few frames of its own, so that a parked thread's stack is worth
# comparing.
#
#   ruby parked_server.rb OUT_DIR [--idle | --calls]
#
# The main thread computes (a plain integer loop, no allocation: its stack
# stands still for milliseconds at a time) unless --idle (then it sleeps
# too). --calls makes each step of the loop a recursive call of a depth
# that cycles from 1 to 8 (dig), so its stack changes to a different stack
# every few hundred nanoseconds, faster than any read of it. The parked threads are named "sleep-N",
# "queue-N", "mutex-N" and "pipe-N" and never wake while the program runs:
# their stacks do not change, so every sample must show each one exactly as
# `ruby bt -a` shows it with every thread stopped. OUT_DIR/ready appears once
# every thread is parked; OUT_DIR/threads.json lists their names and TIDs
# where Ruby keeps them (3.1+: Thread#native_thread_id).
# Runs unchanged on Ruby 2.7 to 4.0, with no gems.

require "json"

OUT = ARGV[0] or abort("usage: parked_server.rb OUT_DIR [--idle]")
OPTS = ARGV[1..-1] + ENV.fetch("RBPEEK_PARKED_ARGS", "").split
IDLE = OPTS.include?("--idle")
CALLS = OPTS.include?("--calls")

QUEUE = Queue.new
LOCK = Mutex.new
READER, WRITER = IO.pipe

def nap_forever
  sleep
end

def sleeper_loop
  loop { nap_forever }
end

def wait_for_job
  QUEUE.pop
end

def queue_worker
  loop { wait_for_job }
end

def take_lock
  LOCK.synchronize { :never }
end

def lock_worker
  take_lock
end

def read_request
  READER.read(1)
end

def pipe_worker
  read_request
end

def compute
  i = 0
  x = 0
  while i < 100_000
    x = (x * 31 + i) & 0xffff
    i += 1
  end
  x
end

def dig(depth, x)
  depth == 0 ? (x * 31 + 1) & 0xffff : dig(depth - 1, x)
end

def compute_calls
  i = 0
  x = 0
  while i < 100_000
    x = dig(i & 7, x)
    i += 1
  end
  x
end

def serve
  if CALLS
    loop { compute_calls }
  else
    loop { compute }
  end
end

# The lock is taken by a thread that then sleeps forever, so the mutex
# workers park in Mutex#lock.
holder_ready = Queue.new
holder = Thread.new do
  LOCK.lock
  holder_ready << true
  nap_forever
end
holder.name = "sleep-0"
holder_ready.pop

threads = [holder]
3.times { |i| t = Thread.new { sleeper_loop }; t.name = "sleep-#{i + 1}"; threads << t }
4.times { |i| t = Thread.new { queue_worker }; t.name = "queue-#{i}"; threads << t }
4.times { |i| t = Thread.new { lock_worker }; t.name = "mutex-#{i}"; threads << t }
3.times { |i| t = Thread.new { pipe_worker }; t.name = "pipe-#{i}"; threads << t }

# Parked: each thread is in sleep, or has a waiter queued.
deadline = Time.now + 30
until threads.all? { |t| t.status == "sleep" } && QUEUE.num_waiting == 4
  abort("threads never parked") if Time.now > deadline
  Thread.pass
  sleep 0.01
end
sleep 0.2 # the pipe readers are in read(2) once their status says sleep

info = threads.map do |t|
  { "name" => t.name, "tid" => (t.respond_to?(:native_thread_id) ? t.native_thread_id : nil) }
end
File.write(File.join(OUT, "threads.json"),
           JSON.generate({ "ruby_version" => RUBY_VERSION, "pid" => Process.pid, "threads" => info }))
File.write(File.join(OUT, "ready"), "")

if IDLE
  nap_forever
else
  serve
end
