# Benchmark workload for `ruby allocs --sites` on a many-threaded target
# (tests/bench/bench_alloc_sites_threads.py): as a clustered puma worker
# under load, one thread allocates all along and THREADS - 1 others (12 by
# default: 13 in all, as the worker of issue 37) wake every few
# milliseconds from a wait in the kernel, do a little work and wait again,
# so the GVL changes hands hundreds of times a second. The allocating
# thread counts its own iterations and logs "REALTIME ITERATIONS
# CPU_SECONDS" (its own thread's CPU clock) every 50 ms to OUT_DIR/iter.log.
OUT = ARGV[0] or abort("usage: alloc_threads_workload.rb OUT_DIR [THREADS]")
THREADS = Integer(ARGV[1] || ENV["THREADS"] || 13)
NAP = Float(ENV["NAP"] || 0.005)
LOG = File.open(File.join(OUT, "iter.log"), "a")
LOG.sync = true

def work(n)
  i = 0
  while i < n
    s = "x" * 4
    a = [s, i]
    i += 1
  end
  a
end

(THREADS - 1).times do |k|
  Thread.new do
    r, _w = IO.pipe
    loop do
      IO.select([r], nil, nil, NAP) # a request's wait for its socket
      work(20)
    end
  end
end

iters = 0
last = 0.0
File.write(File.join(OUT, "ready"), Process.pid.to_s)
loop do
  work(500)
  iters += 500
  now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  if now - last >= 0.05
    LOG.write(format("%.6f %d %.6f\n", Time.now.to_f, iters, Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)))
    last = now
  end
end
