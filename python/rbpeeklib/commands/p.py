"""`ruby p EXPR`: a VALUE printed as Ruby's own #inspect prints it, read
from memory without running code in the target (see docs/inspect.md)."""

from ..core import FORMAT_JSON, FORMAT_TEXT
from .base import Command, RbpeekError, add_output_options, evaluate_words, parse_args, write_output


class PCommand(Command):
    name = "p"
    summary = "Print a VALUE as Ruby's inspect would (String, Symbol, numbers, Array, Hash, Struct, objects...)."
    usage = """ruby p EXPR [--depth N] [--max-length N] [--raw] [--json] [-o FILE]
          [--vm ADDR] [--layout FILE] [--ruby-version X.Y.Z]

EXPR is anything the debugger evaluates to a VALUE without calling code in
the target: an address (0x7f...), a register ($rdi), a C variable. The
value must be an immediate (Integer, Float, Symbol, nil, true, false) or a
live object of the Ruby heap; anything else is reported as "not a Ruby
object" with the reason (free slot, not in any heap page, bad flags...).
An immediate is followed by a line saying which (0xdeadbeef: Fixnum
1867964279), so that a mistyped address is not taken for a number.

  --depth N          containers nested deeper than N are shown as [\u2026] (default 8)
  --max-length N     elements per container and bytes per String shown (default 100)
  --raw              also the object's header: flags, shape id, embedded or
                     heap, and where its parts are
  --json             {"address", "type", "class", "inspect", "elided", "exact"},
                     and "immediate" (its kind) for an immediate
  -o, --output FILE  write to FILE instead of the debugger's output"""

    def run(self, dbg, argv):
        def build(p):
            p.add_argument("expr", nargs="+")
            p.add_argument("--depth", type=int, default=8)
            p.add_argument("--max-length", type=int, default=100)
            p.add_argument("--raw", action="store_true")
            add_output_options(p)

        args = parse_args(self.name, argv, build)
        if args.depth < 0 or args.max_length < 1:
            raise RbpeekError("ruby p: --depth must be >= 0 and --max-length >= 1")
        value = evaluate_words(dbg, self.name, args.expr)
        session = self.sessions.get(dbg, args)
        text = session.inspect_value(value, args.depth, args.max_length, args.raw,
                                     FORMAT_JSON if args.json else FORMAT_TEXT)
        write_output(dbg, text, args.output)
