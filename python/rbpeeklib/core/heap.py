"""Census: the heap census of rbpeek_heap_census (live objects by type and
class), and its text and JSON renderings. Session.heap_census makes one."""

import ctypes

from .cstructs import CensusSummary
from .lib import Owned, RbpeekError, decode, lib, take_text


class Census(Owned):
    """Live objects by type and class, from rbpeek_heap_census."""

    _free_fn = "rbpeek_census_free"

    def __init__(self, handle):
        self._h = handle

    def summary(self):
        s = CensusSummary()
        lib().rbpeek_census_get_summary(self._h, ctypes.byref(s))
        return {k: getattr(s, k) for k, _ in CensusSummary._fields_}

    def render(self, fmt, top=0, by_bytes=False):
        out = ctypes.c_void_p()
        status = lib().rbpeek_census_render(self._h, fmt, top, 1 if by_bytes else 0, ctypes.byref(out))
        if status != 0:
            raise RbpeekError("heap census: cannot render (%s)" % decode(lib().rbpeek_status_name(status)))
        return take_text(out)
