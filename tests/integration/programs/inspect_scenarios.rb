# encoding: utf-8
# Test target for `ruby gc`, `ruby p` and `ruby bt --locals`: with the GC
# disabled, it builds objects of every core type and records, for each, the
# address ObjectSpace.dump gives and its own #inspect; parks its main thread
# inside a block of a method that has locals of every kind, recording each
# visible local's #inspect and self's; and, last thing before parking, takes
# GC.stat. A debugger then attaches (or gcores it) and compares.
#
#   ruby inspect_scenarios.rb OUT_DIR
#
# Writes OUT_DIR/expected.json, OUT_DIR/gc_stat.json, then OUT_DIR/ready.
# Runs unchanged on Ruby 2.7 to 3.4 and uses no gems (json is written by hand).
require "objspace"

OUT = ARGV[0] or abort("usage: inspect_scenarios.rb OUT_DIR")
begin
  require "fiddle" # an immediate's VALUE as Ruby holds it (Fiddle.dlwrap); a minimal build may lack it
rescue LoadError
  nil
end

3.times { GC.start }
GC.disable # nothing moves or dies from here on: the recorded addresses stay valid

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
           else c.ord < 0x20 || c.ord == 0x7f ? format("\\u%04x", c.ord) : c
           end
  end
  out << '"'
end

module Zoo
  class Keeper
    def initialize(name, age)
      @name = name
      @age = age
    end
  end
end

class NoIvars; end

class ManyIvars
  def initialize
    10.times { |i| instance_variable_set("@v#{i}", i * i) }
  end
end

class Holder
  def initialize
    @items = [1, :two, "three"]
  end

  def parked_frame(req, opt = "optional", *rest, post, kw:, kwopt: :default, **kwrest, &blk)
    local_str = "a local ü"
    local_nil = nil
    local_wide = (1..40).map { |i| "item#{i}" } # longer than a text line of `ruby bt --locals` shows
    local_huge = Array.new(100) { |i| (1..100).map { |j| "x#{i}_#{j}" } } # 100 KB: text reads only its start
    [3.25].each do |blockparam; blocklocal|
      blocklocal = { nested: [local_str, req] }
      $record.call(binding, self)
      sleep
    end
  end
end

Point = Struct.new(:x, :y)
Anon = Struct.new(:a)

objects = []
add = ->(label, obj) { objects << [label, obj] }

# Strings: escapes and encodings
add.("str plain", "hello")
add.("str escapes", "q\"b\\s\n\t\r\e\a\b\f\v\x01\x7f end")
add.("str interpolation marks", "#" + "{x} #" + "$y #" + "@z #x")
add.("str utf8", "ünïcödé 方法 😀")
add.("str utf8 nonprint", "line\u2028sep\u0085")
add.("str utf8 invalid", "ok\xff\xfeok".dup.force_encoding("UTF-8"))
add.("str binary", "\xff\x00abc\"".b)
add.("str usascii", "plain ascii".dup.force_encoding("US-ASCII"))
add.("str usascii high", "a\xe9b".dup.force_encoding("US-ASCII"))
add.("str long", "x" * 300)
add.("str empty", +"")
# Symbols: static (literals) and dynamic (made at run time)
add.("symbols", [:foo, :"foo bar", :foo=, :[], :[]=, :+, :<=>, :@iv, :@@cv, :$gv, :Foo, :foo?, :bar!, :"9x", :"", :ünï])
add.("dynamic symbol", ("dyn" + "amic_sym").to_sym)
add.("dynamic symbol odd", ("dyn amic" + "-sym").to_sym)
# Numbers
add.("fixnums", [0, 1, -1, 42, 2**62 - 1, -(2**62)])
add.("bignum", 2**64)
add.("bignum negative", -(10**40))
add.("floats", [1.0, 0.1, -2.5, 1.0 / 3, 100.0, 1e15, 1e16, 1e20, 123456789.123, 1e-4, 1e-5, 2.5e-10,
                Float::INFINITY, -Float::INFINITY, Float::NAN, 0.0])
add.("float heap", 1e300)
add.("float heap negzero", -0.0)
add.("float heap tiny", 5e-324)
add.("rational", Rational(1, 3))
add.("complex", Complex(1, 2))
add.("specials", [nil, true, false])
# Immediates on their own, each at its VALUE (Fiddle.dlwrap), and an
# address mistyped with an odd last digit, which Ruby reads as a Fixnum
if defined?(Fiddle)
  [42, -7, 2.5, :foo, nil, true, false].each { |v| add.("immediate #{v.inspect}", v) }
  add.("mistyped address 0xdeadbeef", Fiddle.dlunwrap(0xdeadbeef))
end
# Containers
rec = [1]
rec << rec
add.("array empty", [])
add.("array mixed", [1, "a", :b, nil, 2.5, [3, [4]]])
add.("array recursive", rec)
add.("array long", (1..20).to_a)
add.("hash empty", {})
add.("hash small", { a: 1, "b" => 2, 3 => [4], nil => nil, :"x y" => 5 })
add.("hash big", (1..12).to_h { |i| ["k#{i}", i] })
rh = { k: 1 }
rh[:self] = rh
add.("hash recursive", rh)
add.("range", 1..10)
add.("range exclusive", 1...10)
add.("range strings", "a".."z")
add.("struct", Point.new(1, "two"))
add.("struct anonymous", Anon.new(nil))
add.("data", Data.define(:lat, :lng).new(lat: 1, lng: 2)) if defined?(Data) && Data.respond_to?(:define)
# Objects, classes, modules
add.("object no ivars", NoIvars.new)
add.("object ivars", Zoo::Keeper.new("Ann", 41))
add.("object many ivars", ManyIvars.new)
removed = Zoo::Keeper.new("Bob", 7)
removed.remove_instance_variable(:@name)
add.("object removed ivar", removed)
add.("class", String)
add.("class nested", Zoo::Keeper)
add.("module", Comparable)
add.("class anonymous", Class.new)
add.("exception", RuntimeError.new("boom"))
add.("exception no message", StandardError.new)

# Procs (proc.c's rb_block_to_s) and Regexps (re.c's rb_reg_desc)
class MyProc < Proc; end
add.("proc", proc { |x| x })
add.("lambda", lambda { |x| x })
add.("lambda stabby", ->(a, b = 1) { a + b })
add.("proc subclass", MyProc.new { 1 })
add.("proc symbol", :upcase.to_proc)
add.("proc method", 1.method(:+).to_proc)
add.("procs in an array", [proc { 2 }, :to_s.to_proc])
# Methods and UnboundMethods (proc.c's method_inspect): every parameter
# kind, anonymous and forwarded ones, aliases, attr methods, define_method,
# singleton and module methods, C methods of fixed and variable arity
module Greeter
  def greet(name); end
end

class Meths
  include Greeter
  attr_reader :reader
  attr_writer :writer
  def every(a, b = 1, *c, d, e:, f: 2, **g, &h); end
  def nokw(a, **nil); end
  def fwd(...); end
  def anon_rest(*); end
  def anon_kwrest(**); end
  def posts(a, (b, c), d); end
  def none; end
  alias_method :aliased, :every
  define_method(:dm) { |x, y = 1| x }
  ruby2_keywords def r2k(*args); end
  def self.klass_m(x); end
  if RUBY_VERSION >= "3.1"
    class_eval("def anon_block(&); end")
  end
end

meths = Meths.new
solo = Object.new
def solo.solo(a); end
add.("method every kind", meths.method(:every))
add.("method **nil", meths.method(:nokw))
add.("method forwarding", meths.method(:fwd))
add.("method anonymous rest", meths.method(:anon_rest))
add.("method anonymous kwrest", meths.method(:anon_kwrest))
add.("method destructuring", meths.method(:posts))
add.("method no parameters", meths.method(:none))
add.("method alias", meths.method(:aliased))
add.("method attr_reader", meths.method(:reader))
add.("method attr_writer", meths.method(:writer=))
add.("method define_method", meths.method(:dm))
add.("method ruby2_keywords", meths.method(:r2k))
add.("method anonymous block", meths.method(:anon_block)) if RUBY_VERSION >= "3.1"
add.("method of a module", meths.method(:greet))
add.("method of Kernel", meths.method(:puts))
add.("method singleton of a class", Meths.method(:klass_m))
add.("method singleton of an object", solo.method(:solo))
add.("method of an object with a singleton class", solo.method(:frozen?))
add.("method C variable arity", "str".method(:count))
add.("method C fixed arity 1", 1.method(:+))
add.("method C fixed arity 2", "str".method(:insert))
add.("method C fixed arity 0", "str".method(:upcase!))
add.("method module function", Math.method(:sqrt))
add.("method optimized send", 1.method(:send))
add.("method optimized call", proc { 1 }.method(:call))
add.("method Struct reader", Point.new(1, 2).method(:x))
add.("method Struct writer", Point.new(1, 2).method(:y=))
add.("unbound method", Meths.instance_method(:every))
add.("unbound method of a module", Greeter.instance_method(:greet))
add.("unbound method inherited from a module", Meths.instance_method(:greet))
add.("unbound method C", String.instance_method(:count))
add.("unbound method alias", Meths.instance_method(:aliased))
add.("methods in an array", [meths.method(:none), Meths.instance_method(:none)])
add.("regexp", /ab+c/)
add.("regexp options", %r{a/b\/c}mix)
add.("regexp slash only", Regexp.new("a/b"))
add.("regexp n", /abc/n)
add.("regexp binary", Regexp.new("x\xffy".b))
add.("regexp utf8", /ünï+/)
add.("regexp utf8 escaped", %r{ü/}i)
add.("regexp controls", Regexp.new("a\tb\x01c \n"))
add.("regexp escapes", /\d+\s*\n\//)
add.("regexp empty", //)
# Times (time.c's time_inspect; their broken-down time is filled in by the
# recording's own #inspect, before rbpeek looks)
add.("time utc nsec", Time.at(1_700_000_000, 123_456_789, :nsec).utc)
add.("time utc ms", Time.at(1_700_000_000, 120, :millisecond).utc)
add.("time utc whole", Time.utc(2026, 11, 25, 17, 0, 0))
add.("time local", Time.at(1_700_000_000, 5, :usec))
add.("time offset", Time.at(1_700_000_000).getlocal("+05:30"))
add.("time offset seconds", Time.at(1_700_000_000).getlocal("-03:37:30"))
add.("time before 1970", Time.utc(1969, 12, 31, 23, 59, 59, 250_000))
add.("main (top-level self)", self)

def fixnum_value(n)
  format("0x%x", (n << 1) | 1)
end

docs = objects.map do |label, obj|
  addr = nil
  dump = ObjectSpace.dump(obj)
  heap = dump[/"address":"(0x[0-9a-f]+)"/, 1]
  if heap
    addr = heap
  elsif defined?(Fiddle)
    addr = format("0x%x", Fiddle.dlwrap(obj) & (2**64 - 1)) # a negative Fixnum's comes signed
  elsif obj.is_a?(Integer)
    addr = fixnum_value(obj)
  end
  bits = obj.is_a?(Float) ? [obj].pack("D").unpack1("Q").to_s : nil
  %({"label": #{json_str(label)}, "address": #{json_str(addr)}, "immediate": #{!heap}, ) +
    %("float_bits": #{json_str(bits)}, ) +
    %("class": #{json_str(obj.class.to_s)}, "inspect": #{json_str(obj.inspect)}})
end

$record = lambda do |b, slf|
  locals = b.local_variables.map do |n|
    %(#{json_str(n)}: #{json_str(b.local_variable_get(n).inspect)})
  end
  File.write(File.join(OUT, "expected.json"),
             %({"ruby_version": #{json_str(RUBY_VERSION)}, "pid": #{Process.pid},\n) +
             %( "self": #{json_str(slf.inspect)}, "owner": "Holder",\n) +
             %( "locals": {#{locals.join(', ')}},\n) +
             %( "objects": [#{docs.join(",\n  ")}]}\n))
  # The recording below allocates some objects after GC.stat: with the GC
  # disabled, a heap with almost no free slot left would grow a page for them
  # and GC.stat's page counts would no longer hold. Fill the last page first
  # (bounded), so that a fresh page is there with room for them.
  20_000.times { break if GC.stat(:heap_free_slots) >= 300; Object.new }
  # GC.stat last, into a hash made beforehand, written through files opened
  # beforehand, so that the recording adds (almost) nothing after it
  stat = {}
  GC.stat(stat)
  gc_file = File.open(File.join(OUT, "gc_stat.json"), "w")
  ready_file = File.open(File.join(OUT, "ready.tmp"), "w")
  gc_file.write("{")
  ready_file.write(Process.pid.to_s)
  state = GC.latest_gc_info(:state)
  GC.stat(stat)
  gc_file.write(stat.map { |k, v| %("#{k}": #{v}) }.join(", ") + %(, "state": "#{state}", "stress": #{GC.stress}}\n))
  gc_file.close
  ready_file.close
  File.rename(File.join(OUT, "ready.tmp"), File.join(OUT, "ready"))
end

Holder.new.parked_frame(:required, "opt given", 1, 2, :post, kw: "kw value", extra: [1]) { |x| x }
