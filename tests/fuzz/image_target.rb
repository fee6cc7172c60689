# The Ruby whose memory the fuzz harnesses replay (scripts/fuzz-record.sh
# gcores it and records the pages rbpeek's readers touch): one of each
# thing the readers decode, kept small so the image stays small. Named
# threads in sleep, a Mutex held and waited for, a Queue, a
# ConditionVariable, a Thread#join, a deadlock pair, a Fiber, a 40-frame
# recursion, blocks and a C method calling back into Ruby, a method with
# locals of every kind `ruby p` prints (bt --locals, frame): among them a
# String in an encoding that is not one of the twelve built-in ones, a
# Proc, a Method, an UnboundMethod, a Time and a Regexp, whose structs the
# object builder of fuzz_objects copies the type of (objbuild.h), an
# exception, a Data (3.2+) and objects with many ivars (on 3.3+, past a
# class's shape variations: "too complex"). Writes OUT_DIR/ready once
# everything is parked.
OUT = ARGV[0]
PARKED = Queue.new

def deep(n)
  n.zero? ? (PARKED << 1; sleep) : deep(n - 1)
end

held = Mutex.new
a = Mutex.new
b = Mutex.new
cv_lock = Mutex.new
cv = ConditionVariable.new
q = Queue.new
Point = Struct.new(:x, :y)
Pair = Data.define(:a, :b) if defined?(Data) && Data.respond_to?(:define)
class Varied; end

class Holder
  def initialize
    @name = "holder"
    @items = [1, :two, 3.5]
  end

  def park(arg, opt = 2, *rest, key:, kw: nil, **more, &blk)
    str = "text \u00e9 #{arg}"
    latin = "caf\xe9".dup.force_encoding("ISO-8859-1") # not a built-in encoding: its name is read from the table
    sym = :symbol
    ary = [1, [2, [3, nil]], "s", 2**70]
    hsh = {a: 1, "b" => [true, false], 3 => {nested: 1.5}}
    big = {}
    20.times { |i| big[i] = i.to_s }
    obj = Point.new(1, "y")
    rng = (1..10)
    flt = 1.0e-3
    cls = Holder
    rat = Rational(1, 3)
    cpx = Complex(1, -2)
    hflt = 1.0e-300 # out of a Flonum's range: a heap Float
    tim = Time.at(1_700_000_000, 123_456_789, :nsec).utc
    tim.inspect # fills in its broken-down time
    meth = method(:park)
    umeth = Holder.instance_method(:park)
    prc = ->(x) { x }
    re = /a+b/i
    err = RuntimeError.new("boom")
    dat = defined?(Pair) ? Pair.new(a: 1, b: "two") : nil
    varied = Array.new(10) { |i| Varied.new.tap { |o| o.instance_variable_set(:"@k#{i}", i) } }
    PARKED << 1
    sleep
    [str, latin, sym, ary, hsh, big, obj, rng, flt, cls, rest, key, kw, more, blk, rat, cpx, hflt, tim, meth, umeth, prc,
     re, err, dat, varied]
  end
end

threads = []
threads << Thread.new { Thread.current.name = "deep"; deep(40) }
threads << Thread.new { Thread.current.name = "holder"; held.lock; PARKED << 1; sleep }
sleep 0.05 until held.locked?
threads << Thread.new { Thread.current.name = "waiter"; PARKED << 1; held.lock }
threads << Thread.new { Thread.current.name = "queue"; PARKED << 1; q.pop }
threads << Thread.new { Thread.current.name = "condvar"; cv_lock.synchronize { PARKED << 1; cv.wait(cv_lock) } }
threads << Thread.new { Thread.current.name = "joiner"; PARKED << 1; threads[0].join }
threads << Thread.new { Thread.current.name = "dead-a"; a.lock; sleep 0.2; PARKED << 1; b.lock }
threads << Thread.new { Thread.current.name = "dead-b"; b.lock; sleep 0.2; PARKED << 1; a.lock }
threads << Thread.new { Thread.current.name = "locals"; Holder.new.park("a", 3, 4, key: 5, extra: 6) { 1 } }
threads << Thread.new do
  Thread.current.name = "callbacks"
  fiber = Fiber.new { Fiber.yield 1 }
  fiber.resume
  [1, 2].each { |x| 2.times { (PARKED << 1; sleep) if x == 2 } }
end
threads.size.times { PARKED.pop }
sleep 0.1 until threads.all? { |t| t.status == "sleep" }
sleep 0.2
File.write(File.join(OUT, "ready"), Process.pid.to_s)
sleep
