"""`ruby page ADDR`: the heap page holding ADDR, slot by slot with each
slot's type, class and GC bits, and the page's free list, as CRuby's
dump_page shows it, read from memory only (see docs/inspect.md)."""

from ..core import FORMAT_JSON, FORMAT_TEXT
from .base import Command, add_output_options, evaluate_words, parse_args, write_output


class PageCommand(Command):
    name = "page"
    summary = "The heap page holding ADDR: slot size, every slot's type, class and GC bits, the free list."
    usage = """ruby page ADDR [--json] [-o FILE] [--vm ADDR] [--layout FILE] [--ruby-version X.Y.Z]

ADDR is anything the debugger evaluates to an address in a heap page (an
object's address, a register, a C variable). Shows the page's slot size,
slot count and free, final and pinned counts; for every slot its address,
type, class and GC bits: M marked, U uncollectible, K marking,
W wb_unprotected, P pinned, R remembered (3.3+), and its age (0-3; 3 is
old); free slots and whether each is on the page's free list. The slot
holding ADDR is marked '>'. An address in no heap page gives one line.

  --json             {"page", "slot_size", "total_slots", "free_slots",
                     "slots": [{"address", "type", "class", "marked", ...}]}
  -o, --output FILE  write to FILE instead of the debugger's output"""

    def run(self, dbg, argv):
        def build(p):
            p.add_argument("addr", nargs="+")
            add_output_options(p)

        args = parse_args(self.name, argv, build)
        addr = evaluate_words(dbg, self.name, args.addr)
        session = self.sessions.get(dbg, args)
        text = session.page_render(addr, FORMAT_JSON if args.json else FORMAT_TEXT)
        write_output(dbg, text, args.output)
