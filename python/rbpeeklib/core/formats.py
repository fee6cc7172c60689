"""The profile's output formats, one row each: the option that asks for it
(--NAME FILE), its help line, the C writer that writes it
(rbpeek_profile_write_NAME) with the options struct it takes and how that
is filled from what the sampler knows, and whether it is written when no
format is asked for. `ruby sample` and `ruby allocs --sites` build their
options and usage text from this table, the sampling report writes the
files through it, the binding declares the writers' signatures from it,
and the command line refuses its options with several processes
(cli_multi.py): a new format is a C writer (core/src/output/), one row
here, and its docs (docs/design.md, "Where a new command or output format
goes"; tests/tools/test_commands_listed.py checks each place has it)."""

import ctypes

from .cstructs import PprofOptions, SvgOptions


class Format:
    def __init__(self, name, help_text, options=None, fill=None, default=False):
        self.name = name                # the option --NAME and the writer rbpeek_profile_write_NAME
        self.help = help_text           # one or more lines of the usage text
        self.options = options          # the ctypes struct the writer takes after the path, or None
        self.fill = fill                # facts -> an instance of options
        self.default = default          # written (as rbpeek-PID-TIME.NAME) when no format is asked for

    @property
    def writer(self):
        return "rbpeek_profile_write_" + self.name

    def argtypes(self):
        """The writer's ctypes argument types: profile, path[, options]."""
        return [ctypes.c_void_p, ctypes.c_char_p] + ([ctypes.POINTER(self.options)] if self.options else [])


def _svg(facts):
    """title; ci_samples and ci_z: each box's share with its interval
    (rbpeek_share_interval), from that many effective samples."""
    title = facts.get("title")
    return SvgOptions(0, 0.0, title.encode() if title else None, 0, float(facts.get("ci_samples") or 0.0),
                      float(facts.get("ci_z") or 0.0))


def _pprof(facts):
    """period_s: the time one sample stands for; start: time.time() when
    sampling began; duration: how long it ran."""
    return PprofOptions(int(facts.get("period_s", 0.01) * 1e9), 1 if facts.get("on_cpu") else 0,
                        int(facts.get("start", 0.0) * 1e9), int(facts.get("duration", 0.0) * 1e9))


FORMATS = (
    Format("folded", 'folded stacks ("root;...;leaf count"), for flamegraph.pl', default=True),
    Format("svg", "an interactive SVG flamegraph", SvgOptions, _svg, default=True),
    Format("speedscope", "speedscope JSON (https://www.speedscope.app)"),
    Format("pprof", "pprof's gzip'd profile.proto (go tool pprof, Pyroscope,\n"
                    "Parca): samples/count and wall (cpu with --on-cpu)\n"
                    "nanoseconds, one sampling interval per sample", PprofOptions, _pprof),
)

BY_NAME = {f.name: f for f in FORMATS}


def synopsis(indent):
    """The formats' options for a usage synopsis, wrapped under indent."""
    import textwrap  # deferred: only the usage texts of sample and allocs wrap lines
    return textwrap.fill(" ".join("[--%s FILE]" % f.name for f in FORMATS), width=100 - indent,
                         subsequent_indent=" " * indent)


def help_block():
    """The usage text's lines for the formats: '  --NAME FILE  help'."""
    lines = []
    for f in FORMATS:
        first, *rest = f.help.split("\n")
        lines.append("  %-17s  %s" % ("--%s FILE" % f.name, first))
        lines.extend(" " * 21 + r for r in rest)
    return "\n".join(lines)


def defaults_text():
    """What is written when no format is asked for, as the usage says it."""
    import textwrap  # deferred, as in synopsis
    asked = "/".join("--" + f.name for f in FORMATS)
    files = " and ".join("rbpeek-PID-TIME.%s" % f.name for f in FORMATS if f.default)
    return textwrap.fill("Without %s it writes %s in the current directory." % (asked, files), width=80)
