# Test target of it.arch_refusal (issue 39): the program of the issue's
# report, run as an arm64 Ruby under qemu-aarch64. A thread named "waiter"
# parked in Queue#pop, one named "sleeper" parked 7 frames deep, the main
# thread asleep. It writes its own view (platform, each thread's name and
# backtrace_locations) to OUT_DIR/expected.txt, then OUT_DIR/ready (its
# pid), and stays parked.
#
#   ruby arch_threads.rb OUT_DIR

OUT = ARGV[0] or abort("usage: arch_threads.rb OUT_DIR")
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
2.times { parked.pop }
# parked: each thread is in its wait (pop or sleep) before it is recorded
sleep 0.05 until [waiter, sleeper].all? { |t| t.status == "sleep" }

File.open(File.join(OUT, "expected.txt"), "w") do |f|
  f.puts "platform #{RUBY_PLATFORM}"
  f.puts "version #{RUBY_VERSION}"
  Thread.list.each do |t|
    f.puts "thread #{t.name || (t == Thread.main ? 'main' : '-')} #{t.status}"
    # the main thread is the one writing: its own frames are these lines'
    (t == Thread.current ? caller_locations(0) : t.backtrace_locations).each { |l| f.puts "  #{l}" }
  end
end
File.write(File.join(OUT, "ready"), Process.pid.to_s)
sleep
