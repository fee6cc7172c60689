# Test target for `ruby allocs --sites`: one thread allocates at two sites
# in a known ratio, and the program measures each site's allocations itself
# with GC.stat(:total_allocated_objects).
#
#   ruby alloc_sites.rb OUT_DIR [same|two|kinds]
#
# same (the default): site_a allocates three small Strings for every one
# site_b does, the same kind of object at the same cost, so an unbiased
# estimator gives them 75% and 25%. kinds: site_a allocates small Strings,
# site_b 100-element Arrays, one Array for every three Strings (the bias
# measurement of docs/allocations.md). two: as same, and no other site: the
# two sites are the program's allocations (but the log's few), so a site's
# share of them is what `ruby allocs --sites` prints and its interval
# states (the precision benchmark). In same mode two more sites, a few
# calls a round, allocate where `ruby allocs --sites` reads the type:
# site_c a Point (Class#new), site_d a Pair (a Struct class's own new).
# Each site's line, its method's lines and label (as the Ruby's own
# backtrace_locations give it: "Object#site_a" from 3.4) are written to
# OUT_DIR/sites.json with the Ruby's version, and every 50 ms a line
# "REALTIME TOTAL_ALLOCATED SITE_A SITE_B" to OUT_DIR/alloc.log: the totals
# of GC.stat(:total_allocated_objects) and the allocations counted at each
# site so far (the counter's difference around each call). Writes
# OUT_DIR/ready once warm (200 rounds); from then on it allocates only
# while OUT_DIR/busy exists (a test creates it around each run it
# checks: harness.Target.computing) and naps 10 ms at a time otherwise,
# still logging. Runs on Ruby 2.7 to 3.4 with no gems.

OUT = ARGV[0] or abort("usage: alloc_sites.rb OUT_DIR [same|two|kinds]")
MODE = ARGV[1] || ENV["ALLOC_SITES_MODE"] || "same"
BUSY = File.join(OUT, "busy")
LOG = File.open(File.join(OUT, "alloc.log"), "a")
LOG.sync = true

def site_a(n)
  return caller_locations(0, 1)[0].label if n < 0 # its label as Ruby gives it
  i = 0
  while i < n
    "a" * 4 # SITE_A
    i += 1
  end
end

def site_b_same(n)
  return caller_locations(0, 1)[0].label if n < 0 # its label as Ruby gives it
  i = 0
  while i < n
    "b" * 4 # SITE_B_SAME
    i += 1
  end
end

def site_b_kinds(n)
  return caller_locations(0, 1)[0].label if n < 0 # its label as Ruby gives it
  i = 0
  while i < n
    Array.new(100) # SITE_B_KINDS
    i += 1
  end
end

class Point; end
Pair = Struct.new(:x, :y)

def site_c(n)
  i = 0
  while i < n
    Point.new # SITE_C
    i += 1
  end
end

def site_d(n)
  i = 0
  while i < n
    Pair.new(1, 2) # SITE_D
    i += 1
  end
end

# each site's line, and its method's first and last lines: a Ruby frame
# caught in the allocator may report an earlier line of its method (an
# instruction that does not save its pc, as 3.1's putstring)
lines = {}
src = File.readlines(__FILE__)
src.each_with_index do |l, i|
  next unless l =~ /# (SITE_\w+)$/
  first = i
  first -= 1 until src[first].start_with?("def ")
  last = i
  last += 1 until src[last].start_with?("end")
  lines[$1] = [i + 1, first + 1, last + 1]
end
b_name = MODE == "kinds" ? "SITE_B_KINDS" : "SITE_B_SAME"
b_method = MODE == "kinds" ? "site_b_kinds" : "site_b_same"
# per call: "a" * 4 allocates two Strings (the literal's copy, the
# product); Array.new(100) one Array (its 800 bytes are malloc'd, not a
# slot). The calls per round are drawn at random, three allocations at
# site_a for one at site_b on average: with fixed rounds the GCs (whose
# cost goes to the allocation that starts one) could lock to one phase of
# the round, and always start at the same site.
RNG = Random.new(Process.pid)
File.write(File.join(OUT, "sites.json.tmp"),
           "{\"ruby_version\": \"#{RUBY_VERSION}\", \"path\": \"#{__FILE__}\", \"mode\": \"#{MODE}\", " \
           "\"a\": {\"label\": \"#{site_a(-1)}\", \"lineno\": #{lines["SITE_A"][0]}, \"lines\": #{lines["SITE_A"][1, 2]}}, " \
           "\"b\": {\"label\": \"#{send(b_method, -1)}\", \"lineno\": #{lines[b_name][0]}, \"lines\": #{lines[b_name][1, 2]}}, " \
           "\"c\": {\"label\": \"site_c\", \"lineno\": #{lines["SITE_C"][0]}, \"class\": \"Point\"}, " \
           "\"d\": {\"label\": \"site_d\", \"lineno\": #{lines["SITE_D"][0]}, \"class\": \"Pair\"}}\n")
File.rename(File.join(OUT, "sites.json.tmp"), File.join(OUT, "sites.json"))

count_a = 0
count_b = 0
last = 0.0
warm = 0
busy = true
loop do
  unless busy
    sleep 0.01
    busy = File.exist?(BUSY)
  end
  if busy
    g0 = GC.stat(:total_allocated_objects)
    b_calls = 50 + RNG.rand(101)
    a_calls = MODE == "kinds" ? (3 * b_calls + 1) / 2 : 3 * b_calls
    site_a(a_calls)
    g1 = GC.stat(:total_allocated_objects)
    MODE == "kinds" ? site_b_kinds(b_calls) : site_b_same(b_calls)
    g2 = GC.stat(:total_allocated_objects)
    count_a += g1 - g0
    count_b += g2 - g1
    if MODE == "same" # counted in neither site's count: the split is a's and b's
      # more Points: Debian's 3.1 judges Class#new's plain objects in the
      # allocator only with the GC at work (profile/alloc_sites.c)
      site_c(b_calls / 2)
      site_d(b_calls / 5)
    end
    warm += 1
    File.write(File.join(OUT, "ready"), Process.pid.to_s) if warm == 200
  end
  now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  if now - last >= 0.05
    LOG.write(format("%.6f %d %d %d\n", Time.now.to_f, GC.stat(:total_allocated_objects), count_a, count_b))
    last = now
    # the file is looked at between rounds, not in them: a system call in
    # the rounds would be where a tracer's stops land
    busy = warm < 200 || File.exist?(BUSY)
  end
end
