# encoding: utf-8
# Test target for a damaged heap (issue 24): with the GC disabled, it makes
# a Rational and a Complex contain themselves the way a crashed process's
# heap can (their numerator or real part pointing at the object itself,
# written through Fiddle into the object's slot: RRational and RComplex
# hold their two VALUEs right after the 16-byte RBasic on every Ruby from
# 2.7 to 3.4), and two that contain each other; records their addresses
# and a healthy value's #inspect; and parks its main thread in a method
# whose locals hold them. Ruby itself must never look at them again (its
# own #inspect would recurse without end): nothing does until it is
# killed.
#
#   ruby hostile_scenarios.rb OUT_DIR
#
# Writes OUT_DIR/expected.json, then OUT_DIR/ready.
require "fiddle"

OUT = ARGV[0] or abort("usage: hostile_scenarios.rb OUT_DIR")

3.times { GC.start }
GC.disable # nothing moves or is collected (or marked) from here on

def addr(obj)
  Fiddle.dlwrap(obj)
end

# Writes the VALUE of part into obj's slot at offset (16: numerator / real
# part, 24: denominator / imaginary part).
def poke(obj, offset, part)
  Fiddle::Pointer.new(addr(obj))[offset, 8] = [addr(part)].pack("Q")
end

def park(rat, cpx, cpx_imag, mutual, list, healthy)
  File.write(File.join(OUT, "ready"), Process.pid.to_s)
  sleep
end

healthy = [1, "two", Rational(1, 3), Complex(1, -2), 2**70]
healthy_inspect = healthy.inspect
rat = Rational(2, 3)        # (self/3)
cpx = Complex(1, 2)         # (self+2i)
cpx_imag = Complex(4, 5)    # (4+selfi)
mutual = Rational(5, 7)     # ((mutual+1i)/7)
inner = Complex(1, 1)
list = [rat, cpx, "ok"]
poke(rat, 16, rat)
poke(cpx, 16, cpx)
poke(cpx_imag, 24, cpx_imag)
poke(mutual, 16, inner)
poke(inner, 16, mutual)

json = %({"rat": "0x%x", "cpx": "0x%x", "cpx_imag": "0x%x", "mutual": "0x%x", "inner": "0x%x", "list": "0x%x", ) %
       [addr(rat), addr(cpx), addr(cpx_imag), addr(mutual), addr(inner), addr(list)]
json << %("healthy": "0x%x", "healthy_inspect": "%s", "ruby_version": "%s"}\n) %
        [addr(healthy), healthy_inspect.gsub("\\", "\\\\\\\\").gsub('"', '\\"'), RUBY_VERSION]
File.write(File.join(OUT, "expected.json"), json)
park(rat, cpx, cpx_imag, mutual, list, healthy)
