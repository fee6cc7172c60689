"""`ruby info`: what rbpeek found in the target: Ruby version, where the
struct layout came from, the VM and how it was found, the memory source."""

from ..core import library_path
from .base import Command, parse_args


def describe_group(source):
    """'facts ruby_3_1_7.rs', 'line 3.1 aarch64' -> words a user can follow up
    (another machine's table names it after the group)."""
    kind, _, rest = source.partition(" ")
    what, _, machine = rest.partition(" ")
    if kind == "facts":
        return "public facts (%s: bindgen of that release's headers%s)" % (
            what, ", with %s's glibc types" % machine if machine else "")
    if kind == "line":
        return "the %s line's %ssupplement (layouts/lines/%s%s.layout)" % (
            what, machine + " " if machine else "", machine + "/" if machine else "", what)
    return source


class InfoCommand(Command):
    name = "info"
    summary = "Ruby version, where the struct layout came from, VM address, symbols used."
    usage = """ruby info [--vm ADDR] [--layout FILE] [--ruby-version X.Y.Z]

Shows what rbpeek found: the target's Ruby version, the source of the struct
layout (DWARF, a built-in table, or --layout), the VM address and how it was
found, the memory source, the librbpeek file in use, and read statistics."""

    def run(self, dbg, argv):
        args = parse_args(self.name, argv, lambda p: None)
        d = self.sessions.get(dbg, args).describe()
        memory = {"proc": "/proc/%s/mem (direct)" % dbg.live_pid(), "callback": "through the debugger",
                  "core": "core file"}.get(d["memory_source"], d["memory_source"])
        lines = ["Ruby version:  %s%s" % (d["ruby_version"],
                                         " (from %s)" % d["version_found_by"] if d["version_found_by"] else ""),
                 "Layout:        %s" % d["layout_source"]]
        # Where each group of members came from, when the layout names more than one.
        if len(d["layout_groups"]) > 1:
            lines += ["  members:     %3d from %s" % (g["members"], describe_group(g["source"]))
                      for g in d["layout_groups"]]
        lines += ["Verified:      %s" % d["layout_checks"],
                 "VM:            0x%x (%s)" % (d["vm"], d["vm_found_by"]),
                 "Memory:        %s" % memory,
                 "Library:       %s" % library_path()]
        for name, sym in d["symbols"].items():
            where = "0x%x  (%s)" % (sym["address"], sym["found_by"]) if sym["address"] else "not found"
            lines.append("Symbol:        %-20s %s" % (name, where))
        if d["warning"]:
            lines.append("Warning:       %s" % d["warning"])
        dbg.write("\n".join(lines) + "\n")
