# encoding: utf-8
# Test target for `ruby heap`: builds a heap with a known population, asks
# Ruby itself for its view of it, and parks so a debugger can attach (or
# gcore it) and compare.
#
#   ruby heap_population.rb OUT_DIR [SCALE]
#
# SCALE (default 1, or $HEAP_POPULATION_SCALE) multiplies every count below:
# test_heap.py runs 0.5 (about 400,000 objects over about 460 pages), which
# holds every kind of object and page the full size does at half the time.
#
# The population: hundreds of thousands of instances of the program's own
# classes (nested module names, a subclass chain, one class with many ivars,
# one without any, an anonymous class, subclasses of String/Array/Hash),
# strings of many sizes and encodings (embedded, heap, shared slices,
# binary, multibyte), arrays (empty to long, shared slices), structs (small
# and wide), and a large hash.
#
# Ruby's view, written to OUT_DIR:
#   expected.json  Ruby version, memsize_of_all, the address of a String
#                  whose bytes are not UTF-8, and for each own class its
#                  name (inspect for the anonymous one) and the number of
#                  objects whose class it is (each_object + instance_of?).
#   dump.jsonl     ObjectSpace.dump_all(output: file)
#   counts.json    ObjectSpace.count_objects, taken last, right before
#                  parking, into a preallocated hash through pre-opened files
#                  so that (almost) nothing is allocated after it.
#   ready          the pid
# GC is disabled before recording, so nothing moves or is freed afterwards.
# Uses no gems (json is not guaranteed on the 2.7 build).

require "objspace"

OUT = ARGV[0] or abort("usage: heap_population.rb OUT_DIR [SCALE]")
SCALE = (ARGV[1] || ENV["HEAP_POPULATION_SCALE"] || "1").to_f

module Zoo
  module Deep
    class Animal
      def initialize(name, legs)
        @name = name
        @legs = legs
      end
    end

    class Cat < Animal; end

    class Kitten < Cat
      def initialize(name)
        super(name, 4)
        @toy = nil
      end
    end
  end

  class Keeper
    # many ivars: a heap-allocated ivar buffer on every version
    def initialize(i)
      @a = i
      @b = i + 1
      @c = "k#{i}"
      @d = nil
      @e = :sym
      @f = [i]
      @g = i.to_f
      @h = true
    end
  end
end

class Plain; end
class MyString < String; end
class MyArray < Array; end
class MyHash < Hash; end
Point = Struct.new(:x, :y)
Wide = Struct.new(:a, :b, :c, :d, :e, :f, :g, :h, :i, :j)
$anon_class = Class.new do # anonymous: no constant names it
  def initialize(v)
    @v = v
  end
end

def n(count)
  (count * SCALE).to_i
end

$keep = []

$keep << Array.new(n(100_000)) { |i| Zoo::Deep::Cat.new("cat#{i % 100}", 4) }
$keep << Array.new(n(50_000)) { |i| Zoo::Deep::Kitten.new("k#{i % 10}") }
$keep << Array.new(n(20_000)) { |i| Zoo::Keeper.new(i) }
$keep << Array.new(n(40_000)) { Plain.new }
$keep << Array.new(n(5_000)) { |i| $anon_class.new(i) }

# strings of many sizes: empty, embedded, heap; ASCII, binary, multibyte;
# a few large ones (the dump streams their values) and one of 1 MB
sizes = [0, 1, 7, 15, 23, 24, 40, 63, 100, 255, 1000]
$keep << Array.new(n(60_000)) { |i| "x" * sizes[i % sizes.size] }
$keep << Array.new(200) { |i| "y" * (5000 + i) } + Array.new(20) { |i| "z" * (70_000 + i) } + ["w" * 1_000_000]
$keep << Array.new(n(15_000)) { |i| ("é" * (i % 50)) + "ü" }
$keep << Array.new(n(5_000)) { |i| ([i % 256].pack("C") * (i % 90)).force_encoding(Encoding::BINARY) }
long = "abcdefghij" * 1000
$keep << Array.new(n(10_000)) { |i| long[i % 500, 300] } # shared slices
$keep << Array.new(n(8_000)) { |i| MyString.new("mine#{i}") }
# encodings beyond the twelve built-in ones, ASCII-only or not, and a wide one
$keep << Array.new(n(2_000)) { |i| "latin#{i}".force_encoding(Encoding::ISO_8859_1) }
$keep << Array.new(n(1_000)) { |i| "caf\xE9 #{i}".b.force_encoding(Encoding::ISO_8859_1) }
$keep << Array.new(n(1_000)) { |i| "sjis#{i}".force_encoding(Encoding::Shift_JIS) }
$keep << Array.new(n(1_000)) { |i| "euc#{i}".force_encoding("EUC-KR") }
$keep << Array.new(n(1_000)) { |i| "wide#{i}".encode(Encoding::UTF_16LE) }
$keep << Array.new(n(2_000)) { |i| "with\ttab\nand \"quotes\" \\ and \u0001 \x7f #{i}" }
# A UTF-8 String whose bytes are not UTF-8 (its coderange: broken). Its
# address is recorded for test_heap.py, which marks it 7-bit in a core, as a
# damaged heap may: the dump must still be valid JSON.
$not_utf8 = +"not \xFF\xFE utf-8 \xE6\x97"
$not_utf8.valid_encoding?
NOT_UTF8 = ObjectSpace.dump($not_utf8)[/"address":"(0x[0-9a-f]+)"/, 1]

# arrays: empty to long, shared slices, subclasses
big = Array.new(2000) { |i| i }
$keep << Array.new(n(20_000)) { |i| Array.new(i % 12) { |j| j.even? ? j : "s#{j}" } }
$keep << Array.new(n(5_000)) { |i| big[i % 100, 500] }
$keep << Array.new(n(6_000)) { |i| MyArray.new(i % 5, i) }

# structs, small hashes, subclassed hashes, one large hash
$keep << Array.new(n(15_000)) { |i| Point.new(i, "p#{i}") }
$keep << Array.new(n(4_000)) { |i| Wide.new(i, i, i, i, i, i, i, i, i, "w") }
$keep << Array.new(n(10_000)) { |i| { a: i, "b" => [i], c: nil } }
$keep << Array.new(n(3_000)) { |i| MyHash[i, i.to_s] }
$keep << Hash[Array.new(n(100_000)) { |i| ["key#{i}", i.even? ? i : Plain.new] }]
$keep << Hash.new { |h, k| h[k] = k } # a default proc

OWN = [Zoo::Deep::Animal, Zoo::Deep::Cat, Zoo::Deep::Kitten, Zoo::Keeper, Plain, MyString, MyArray, MyHash,
       Point, Wide, $anon_class].freeze

def json_str(s)
  out = +'"'
  s.to_s.each_char do |c|
    out << case c
           when '"' then '\\"'
           when "\\" then "\\\\"
           else c.ord < 0x20 ? format("\\u%04x", c.ord) : c
           end
  end
  out << '"'
end

3.times { GC.start }
GC.disable

own = OWN.map do |k|
  count = ObjectSpace.each_object(k).count { |o| o.instance_of?(k) }
  %({"name": #{json_str(k.name || k.inspect)}, "count": #{count}})
end
memsize = ObjectSpace.memsize_of_all
File.open(File.join(OUT, "dump.jsonl"), "w") { |f| ObjectSpace.dump_all(output: f) }
File.write(File.join(OUT, "expected.json"),
           %({"ruby_version": #{json_str(RUBY_VERSION)}, "memsize_of_all": #{memsize},\n) +
           %( "not_utf8": #{json_str(NOT_UTF8)},\n) +
           %( "own_classes": [#{own.join(",\n  ")}]}\n))

# count_objects last: into a preallocated hash, written through files opened
# beforehand, so the recording itself adds (almost) nothing after it
counts = {}
ObjectSpace.count_objects(counts) # warm up the call site
counts_file = File.open(File.join(OUT, "counts.json"), "w")
ready_file = File.open(File.join(OUT, "ready.tmp"), "w")
# the first write to an IO allocates its write lock (a Mutex): do it now
counts_file.write("{")
ready_file.write(Process.pid.to_s)
ObjectSpace.count_objects(counts)
counts_file.write(counts.map { |k, v| %("#{k}": #{v}) }.join(", ") + "}\n")
counts_file.close
ready_file.close
File.rename(File.join(OUT, "ready.tmp"), File.join(OUT, "ready"))
sleep
