#!/usr/bin/env python3
"""Writes the seed inputs of the per-operation harnesses into
tests/fuzz/corpus/{snapshot,sample,objects,heappage}/ (their formats are at
the top of each fuzz_*.c; the objects' records in objbuild.h), and
fuzz_memimage's regress-* seeds, which name words of data/ruby3.1.img.gz
(run this again when the image is recorded again):

    python3 tests/fuzz/make_seeds.py

Every seed exists once per recorded image (-3.1, -3.4). The objects seeds
build one value of every kind the builder makes, each as Ruby itself would
hold it, so that on the pristine images they print exactly ("exact": true
in the JSON); scripts/fuzz.sh warns when one no longer does (the builder
or a printer changed). The regress-* seeds build values that once crashed
the printer (what each was is at REGRESS below)."""
import gzip
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGES = {"3.1": 0, "3.4": 1}

KIND = dict(STRING=0, SYMBOL=1, FLOAT=2, BIGNUM=3, RATIONAL=4, COMPLEX=5, ARRAY=6, HASH=7, STRUCT=8,
            RANGE=9, OBJECT=10, PROC=11, METHOD=12, TIME=13, REGEXP=14, CLONE=15, DATA=16)
NIL, TRUE, FALSE, UNDEF = 0x60, 0x61, 0x62, 0x63
FLO = 0x6a          # 1.5 (ob_ref's Flonums: 1.5, -0.25, 100.0, 1e-5, 3.14159, 0.0)
CLS = 0x70          # classes: Object, Holder, Point, String, Array, Hash, Integer, Symbol, Struct, ...
HOLDER = CLS + 1
REAL = 0x80         # the image's own objects
SYM = 0xc0          # static Symbols


def fx(n):
    return 0x50 + n


def rec(kind, v=0, n=0, refs=(), pay=()):
    refs = list(refs) + [NIL] * (6 - len(refs))
    pay = list(pay) + [0] * (6 - len(pay))
    return bytes([KIND[kind], v]) + struct.pack("<H", n) + bytes(refs) + bytes(pay)


def p16(x):
    return (x & 255, x >> 8)


def write(harness, name, data):
    d = os.path.join(HERE, "corpus", harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def objects_seed(name, build, stream, depth=3, max_len=3, locals_=0, root=0):
    """build(o) gives the records, o being where the stream starts (its
    offsets are into the whole input)."""
    recs = build(0)
    off = 4 + 16 * len(recs)
    recs = build(off)
    for img, bit in IMAGES.items():
        b0 = bit | depth << 2 | max_len << 5 | locals_ << 7
        write("objects", f"{name}-{img}", bytes([b0, root, len(recs) | 0x80, 0]) + b"".join(recs) + stream)
    return recs, stream


OBJECTS = [
    # [obj1, obj2, 1]; "hello" in its slot; {heap String => 2, :sym => nil}; a 40-byte String on the heap
    ("array-string-hash", lambda o: [
        rec("ARRAY", 1, 3, pay=p16(o)),
        rec("STRING", 1, 5, pay=p16(o + 3)),
        rec("HASH", 1, 2, pay=p16(o + 8)),
        rec("STRING", 0, 40, pay=p16(o + 12)),
    ], bytes([1, 2, fx(1)]) + b"hello" + bytes([3, fx(2), SYM, NIL]) + b"a heap string that is forty bytes long!!"),
    ("numbers", lambda o: [
        rec("ARRAY", 0, 6, pay=p16(o)),
        rec("FLOAT", 0, 0x4009, pay=(0x1f, 0x85, 0xeb, 0x51, 0xb8, 0x1e)),   # 3.14 on the heap
        rec("BIGNUM", 1, 3, pay=p16(o + 6)),                                   # 4 digits on the heap
        rec("RATIONAL", 0, 0, refs=(fx(1), fx(3))),
        rec("COMPLEX", 0, 0, refs=(fx(1), fx(-2))),
        rec("BIGNUM", 2, 1, pay=p16(o + 6)),                                   # negative, embedded
    ], bytes([1, 2, 3, 4, 5, FLO]) + bytes(range(1, 17))),
    ("struct-range-object", lambda o: [
        rec("ARRAY", 0, 4, pay=p16(o)),
        rec("STRUCT", 1, 2, pay=p16(o + 4)),               # Point x=, y=
        rec("RANGE", 0, 0, refs=(fx(1), fx(9))),
        rec("OBJECT", 1, 0, pay=p16(o + 6)),               # a Holder with its ivars
    ], bytes([1, 2, 3, FLO, fx(7), SYM + 1, SYM + 2, 1, NIL])),
    ("proc-time-regexp-method", lambda o: [
        rec("ARRAY", 0, 5, pay=p16(o)),
        rec("PROC", 0, 0, pay=(3,)),                        # a block of a recorded iseq
        rec("TIME", 0, 0x1234, pay=(0xea, 0x07, 0, 0, 5, 20)),
        rec("REGEXP", 0, 0, refs=(5,)),
        rec("METHOD", 0, 0, refs=(6, HOLDER)),             # a real method entry, of a built Holder
        rec("STRING", 1, 3, pay=p16(o + 5)),
        rec("OBJECT", 1, 0, pay=p16(o + 8)),
    ], bytes([1, 2, 3, 4, 0x22]) + b"a+b" + bytes([fx(1), fx(2), fx(3)])),
    ("procs", lambda o: [
        rec("ARRAY", 0, 4, pay=p16(o)),
        rec("PROC", 0x04 | 0x20, 0, refs=(NIL, NIL, SYM + 3)),   # &:sym, lambda
        rec("PROC", 0x06, 0, refs=(1,)),                         # standing for another Proc
        rec("PROC", 0x02 | 0x20, 0),                             # a C block (ifunc)
    ], bytes([1, 2, 3, NIL])),
    ("methods", lambda o: [
        rec("ARRAY", 0, 4, pay=p16(o)),
        rec("METHOD", 1, 0, refs=(NIL, HOLDER)),                   # UnboundMethod
        rec("METHOD", 2, 0, refs=(4, HOLDER, NIL, SYM, HOLDER), pay=(0, 1, 0)),      # a C method, its argc
        rec("METHOD", 2, 0, refs=(4, HOLDER, NIL, SYM + 1, HOLDER), pay=(0, 3, 0)),  # an attr_reader
        rec("OBJECT", 1, 0, pay=p16(o)),
    ], bytes([1, 2, 3, NIL])),
    ("hashes", lambda o: [
        rec("ARRAY", 0, 3, pay=p16(o)),
        rec("HASH", 0, 12, pay=p16(o + 3)),                 # an st_table
        rec("HASH", 1 | 2, 5, pay=p16(o + 3)),              # an ar table with cleared entries
    ], bytes([1, 2, NIL]) + bytes([SYM + i if i % 2 == 0 else fx(i % 9) for i in range(24)])),
    ("strings", lambda o: [
        rec("ARRAY", 0, 5, pay=p16(o)),
        rec("STRING", 1 | 2, 4, pay=p16(o + 5)),            # ASCII-8BIT
        rec("STRING", 1 | 4, 4, pay=p16(o + 5)),            # US-ASCII
        rec("STRING", 1 | 6, 5, pay=p16(o + 9) + (30,)),    # encoding 30 (read from the Encoding table)
        rec("SYMBOL", 0, 0, refs=(5,)),                     # a dynamic Symbol
        rec("STRING", 1, 6, pay=p16(o + 14)),
    ], bytes([1, 2, 3, 4, 5]) + b"\x00\x01ab" + b"caf\xe9!" + b"dyn_sy"),
    ("clones", lambda o: [
        rec("ARRAY", 0, 4, pay=p16(o)),
        rec("CLONE", 0, 0, pay=(3, 0, 0, 1)),
        rec("CLONE", 0, 0, pay=(11, 0, 0, 2)),
        rec("CLONE", 0, 0, pay=(17, 0, 0, 0)),
    ], bytes([1, 2, 3, NIL])),
    ("locals", lambda o: [
        rec("STRING", 1, 5, pay=p16(o)),
        rec("ARRAY", 1, 2, pay=p16(o + 5)),
    ], b"hello" + bytes([0, fx(3)]) + bytes([0, 1, fx(2), NIL, SYM + 3, FLO + 1] * 6)),
    ("cycle", lambda o: [
        rec("ARRAY", 1, 2, pay=p16(o)),
        rec("HASH", 1, 1, pay=p16(o + 2)),
    ], bytes([0, 1, 1, 0])),
]


# Regression seeds of issue 24 item 1: a Rational whose numerator is
# itself, a Complex whose parts are itself, and a Rational and a Complex
# that contain each other. Each overflowed the stack in numeric_pair()
# before the printer's recursion guard (rbp_recguard); now each prints the
# "contains itself" marker.
REGRESS = [
    ("regress-rational-self", lambda o: [rec("RATIONAL", 0, 0, refs=(0, fx(1)))], b""),
    ("regress-complex-self", lambda o: [rec("COMPLEX", 0, 0, refs=(fx(1), 0))], b""),
    ("regress-rational-complex-mutual", lambda o: [
        rec("RATIONAL", 0, 0, refs=(1, fx(2))),
        rec("COMPLEX", 0, 0, refs=(fx(3), 0)),
    ], b""),
]

# fuzz_memimage's regression seeds of issue 24 item 1: the Rational(1, 3)
# and Complex(1, -2) that image_target.rb's Holder#park holds in locals
# (thread 9, "locals"), made to contain themselves or each other by
# patches (image.c: kind 1 points a word at another word, kind 2 at a
# neighbour of itself), then printed by `ruby p` of the local's word and by
# that thread's `bt --locals`. They name words by index, so they are
# written from the image each time.
def image_words(path):
    d = gzip.open(path).read()
    assert d[:8] == b"RBPIMG01", path
    p = 8
    (n,) = struct.unpack_from("<I", d, p)
    p += 4
    for _ in range(n):
        (l,) = struct.unpack_from("<H", d, p)
        p += 2 + l + 8
    (n,) = struct.unpack_from("<I", d, p)
    p += 4
    pages = []
    for _ in range(n):
        a, v = struct.unpack_from("<QI", d, p)
        p += 12
        pages.append((a & ~4095, d[p:p + v] + bytes(4096 - v)))
        p += v
    pages.sort()  # img_finish's order: a word's index is its page's rank * 512 + its offset / 8
    words = []
    for _, data in pages:
        words.extend(struct.unpack("<512Q", data))
    return words, [a for a, _ in pages]


def memimage_regress():
    words, bases = image_words(os.path.join(HERE, "data", "ruby3.1.img.gz"))
    addr = lambda w: bases[w // 512] + (w % 512) * 8
    T_RATIONAL, T_COMPLEX = 0x0f, 0x0e

    def slot(t, a, b):
        """The one object of type t whose two parts are the Fixnums a and b,
        and the first word holding it."""
        found = [w for w in range(len(words) - 3) if words[w] & 0x1f == t and words[w] >> 32 == 0 and
                 words[w + 2] == (2 * a + 1) % 2**64 and words[w + 3] == (2 * b + 1) % 2**64]
        assert len(found) == 1, (t, found)
        held = [w for w, v in enumerate(words) if v == addr(found[0])]
        assert held, t
        return found[0], held[0]

    rat, rat_held = slot(T_RATIONAL, 1, 3)
    cpx, cpx_held = slot(T_COMPLEX, 1, -2)

    def header(value):  # OP_LOCALS and OP_INSPECT, thread 9, `ruby p` of word `value`
        return bytes([0, 0x18, 0, 9 << 2]) + struct.pack("<I", value)

    def patch(where, kind, small=0, value=0):
        return struct.pack("<IBBHI", where, kind, small & 255, 0, value)

    write("memimage", "regress-rational-self", header(rat_held) + patch(rat + 2, 2, -2))
    write("memimage", "regress-complex-self", header(cpx_held) + patch(cpx + 2, 2, -2) + patch(cpx + 3, 2, -3))
    write("memimage", "regress-rational-complex-mutual",
          header(rat_held) + patch(rat + 2, 1, value=cpx) + patch(cpx + 3, 1, value=rat))


def main():
    memimage_regress()
    # fuzz_objects
    for name, build, stream in OBJECTS + REGRESS:
        objects_seed(name, build, stream, locals_=1 if name == "locals" else 0)
    for img, bit in IMAGES.items():
        # fuzz_snapshot: every rendering (text, JSON, locks, profile) and a retake; and the walk alone
        write("snapshot", f"all-{img}", bytes([0xf0 | bit, 1]))
        write("snapshot", f"walk-{img}", bytes([bit, 0]))
        write("snapshot", f"seven-frames-one-thread-{img}", bytes([0x38 | bit, 2 | 3 << 2]))
        # fuzz_sample: the GVL holders (none: all stopped), none held (--nonblocking), running
        write("sample", f"stopped-{img}", bytes([0x20 | bit, 0, 0, 0, 0, 1]))
        write("sample", f"nonblocking-{img}", bytes([0x20 | bit, 0xff, 0, 0, 0, 1]))
        write("sample", f"running-{img}", bytes([0x30 | bit, 0, 0, 0, 0, 0]))
        # ... two samples, then scaled to 2^64 - 1 (issue 35: the totals wrapped)
        write("sample", f"scaled-huge-{img}", bytes([0x20 | bit, 0, 0, 0, 0, 1 | 2]))
        # ... four threads held, the others change after the 64th read
        later = b"".join(struct.pack("<IBBHI", 0x80000000 | (i * 7919), 2, 0, 0, 0) for i in range(4))
        write("sample", f"held-changing-{img}", bytes([0x20 | bit, 0x0f, 64, 0, 0, 0]) + later)
        # fuzz_heappage: a real page's window of 10 and of 64 slots; a built page with GC bits
        write("heappage", f"real-window-{img}", bytes([0x78 | bit, 5, 0, 9, 0]))
        write("heappage", f"real-window-64-{img}", bytes([0x78 | bit, 20, 20, 63, 0]))
    for img, bit in IMAGES.items():
        recs, stream = [(b(4 + 1 + 16 * len(b(0))), s) for n, b, s in OBJECTS if n == "array-string-hash"][0]
        write("heappage", f"built-bits-{img}", bytes([0xfc | bit, 0, len(recs), 0, 0]) + b"".join(recs) + stream)
        # issue 24: a UTF-8 String whose bytes are not UTF-8, flagged 7-bit (ENC_CODERANGE_7BIT) as a
        # damaged heap may hold it; the dump wrote its bytes unchecked, a line no strict reader reads
        bad = b"caf\xe9 \xff\xfe\xc0\xaf \xed\xa0\x80"
        write("heappage", f"regress-dump-7bit-invalid-utf8-{img}",
              bytes([0x74 | bit, 0, 1, 0, 0]) + rec("STRING", 1 | 1 << 3, len(bad), pay=p16(5 + 16)) + bad)


if __name__ == "__main__":
    main()
