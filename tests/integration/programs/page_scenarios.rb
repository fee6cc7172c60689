# Test target for `ruby page ADDR`: objects of many types, some kept through
# three full GCs (so they are marked, old and uncollectible) and some made
# after GC.disable (unmarked, young); for each, the line ObjectSpace.dump
# gives (address, type, class, slot size, and the GC flags marked, old,
# uncollectible, marking, wb_protected, pinned, read from the page's own
# bitmaps by the Ruby itself). Then GC::INTERNAL_CONSTANTS and GC.stat, and
# it parks. A debugger then attaches (or gcores it) and compares.
#
#   ruby page_scenarios.rb OUT_DIR
#
# Writes OUT_DIR/objects.txt (one "label<TAB>dump" line per object),
# OUT_DIR/constants.txt ("NAME<TAB>value" lines), then OUT_DIR/ready.
# Runs unchanged on Ruby 2.7 to 3.4 and uses no gems.
require "objspace"

OUT = ARGV[0] or abort("usage: page_scenarios.rb OUT_DIR")

Point = Struct.new(:x, :y)
class Keeper
  def initialize(n)
    @n = n
    @name = "keeper #{n}"
  end
end
module Mixin; end

def family(tag)
  {
    "string_#{tag}" => "a string #{tag}",
    "long_string_#{tag}" => "y" * 150 + tag.to_s,
    "array_#{tag}" => [1, 2, tag.to_s],
    "big_array_#{tag}" => Array.new(40) { |i| i },
    "hash_#{tag}" => { a: 1, "b" => tag.to_s },
    "object_#{tag}" => Keeper.new(tag.to_s.size),
    "struct_#{tag}" => Point.new(1, 2),
    "float_#{tag}" => 1.0e-300 * (tag.to_s.size + 1),
    "bignum_#{tag}" => 2**100 + tag.to_s.size,
    "range_#{tag}" => (1..tag.to_s.size),
    "rational_#{tag}" => Rational(1, 3 + tag.to_s.size),
    "complex_#{tag}" => Complex(1, 2 + tag.to_s.size),
    "proc_#{tag}" => proc { tag },
    "class_#{tag}" => Class.new,
    "module_#{tag}" => Module.new,
    "regexp_#{tag}" => Regexp.new("ab+#{tag}"),
    "symbol_#{tag}" => "dynamic_symbol_#{tag}".to_sym,
    "mutex_#{tag}" => Mutex.new,
    "exception_#{tag}" => RuntimeError.new("boom #{tag}"),
  }
end

# Survivors of three full GCs: marked, and old (age 3) where the write
# barrier protects them; then nothing is collected any more.
OLD = family(:old)
3.times { GC.start }
GC.disable
YOUNG = family(:young)

lines = []
OLD.merge(YOUNG).each do |label, obj|
  lines << "#{label}\t#{ObjectSpace.dump(obj).chomp}"
end
File.write(File.join(OUT, "objects.txt"), lines.join("\n") + "\n")
consts = GC::INTERNAL_CONSTANTS.map { |k, v| "#{k}\t#{v}" }
consts << "RUBY_VERSION\t#{RUBY_VERSION}"
consts += GC.stat.map { |k, v| "stat_#{k}\t#{v}" }
File.write(File.join(OUT, "constants.txt"), consts.join("\n") + "\n")
File.write(File.join(OUT, "ready.tmp"), Process.pid.to_s)
File.rename(File.join(OUT, "ready.tmp"), File.join(OUT, "ready"))
sleep
