/*
 * Time#inspect, byte for byte, when it is cheap: time.c's time_inspect
 * prints "%Y-%m-%d %H:%M:%S" from the broken-down time (struct vtm), the
 * subsecond (timew mod 10^9 nanoseconds, trailing zeros dropped) and
 * " UTC" or the offset " +0900" (" +053730" with seconds):
 *
 *   2026-11-25 17:00:00.123456789 +0000
 *
 * A Time keeps its vtm only once something asked for it (tm_got): before
 * that, Ruby computes it with localtime(3), which rbpeek cannot run. A Time
 * without it, with a timew that is a Bignum or a Rational (far dates,
 * Time.at(Rational)), a Rational offset or a Bignum year falls back to the
 * Kernel#to_s form with the reason. Where the mode and tm_got bits live
 * moved: after the vtm before 3.4 (2.7 called the mode `gmt`), inside it
 * from 3.4.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "heap/obj.h"
#include "inspect/inspect_int.h"
#include "vm/rdata.h"
#include "vm/robject.h"

enum { TZMODE_UTC = 1, TZMODE_UNINITIALIZED = 3 };
#define TIME_SCALE INT64_C(1000000000)

static bool field(rbp_insp *in, uint64_t base, rbp_field_id id, uint64_t *out)
{
    return rbp_has(&in->s->layout, id) && rbp_read_field(in->s, base, id, out);
}

bool rbp_insp_time(rbp_insp *in, const rbp_obj *o)
{
    const rbp_layout *L = &in->s->layout;
    rbp_field_id mode_id = rbp_has(L, RBP_L_time_vtm_tzmode) ? RBP_L_time_vtm_tzmode
                           : rbp_has(L, RBP_L_time_tzmode) ? RBP_L_time_tzmode : RBP_L_time_gmt;
    rbp_field_id got_id = rbp_has(L, RBP_L_time_vtm_tm_got) ? RBP_L_time_vtm_tm_got : RBP_L_time_tm_got;
    static const rbp_field_id NEED[] = {
        RBP_L_time_timew, RBP_L_time_vtm_year, RBP_L_time_vtm_utc_offset, RBP_L_time_vtm_mon, RBP_L_time_vtm_mday,
        RBP_L_time_vtm_hour, RBP_L_time_vtm_min, RBP_L_time_vtm_sec,
    };
    for (size_t i = 0; i < sizeof NEED / sizeof NEED[0]; i++)
        if (!rbp_has(L, NEED[i])) return rbp_insp_why(in, "this layout has no struct time_object members");
    if (!rbp_has(L, mode_id) || !rbp_has(L, got_id))
        return rbp_insp_why(in, "this layout has no struct time_object members");
    uint64_t t = 0, d = 0, got = 0, mode = 0, timew = 0, year = 0, off = 0, mon, mday, hour, min, sec;
    if (!rbp_typed_data(in->s, o->addr, &t, &d) || !d)
        return rbp_insp_why(in, "its typed-data header does not point at a struct time_object");
    if (!field(in, d, got_id, &got) || !field(in, d, mode_id, &mode) || !field(in, d, RBP_L_time_timew, &timew) ||
        !field(in, d, RBP_L_time_vtm_year, &year) || !field(in, d, RBP_L_time_vtm_utc_offset, &off) ||
        !field(in, d, RBP_L_time_vtm_mon, &mon) || !field(in, d, RBP_L_time_vtm_mday, &mday) ||
        !field(in, d, RBP_L_time_vtm_hour, &hour) || !field(in, d, RBP_L_time_vtm_min, &min) ||
        !field(in, d, RBP_L_time_vtm_sec, &sec))
        return rbp_insp_why(in, "its struct time_object at 0x%" PRIx64 " cannot be read", d);
    if (mode == TZMODE_UNINITIALIZED) return rbp_insp_why(in, "it is an uninitialized Time");
    if (!got)
        return rbp_insp_why(in, "it holds no broken-down time yet (Ruby computes it with localtime(3) on first use)");
    int64_t ns, y, offset = 0;
    if (!rbp_fixnum_get(timew, &ns))
        return rbp_insp_why(in, "its time is a Bignum or Rational number of nanoseconds, which is not decoded");
    if (!rbp_fixnum_get(year, &y)) return rbp_insp_why(in, "its year is no Fixnum");
    if (mode != TZMODE_UTC && !rbp_fixnum_get(off, &offset))
        return rbp_insp_why(in, "its UTC offset is no Integer (a Rational offset is not decoded)");
    if (mon < 1 || mon > 12 || mday < 1 || mday > 31 || hour > 23 || min > 59 || sec > 60)
        return rbp_insp_why(in, "its broken-down time is out of range (month %" PRIu64 ", day %" PRIu64 ")", mon, mday);
    /* An offset with seconds is not guessed where the release's form of it
     * was not checked (3.0). */
    bool offset_seconds = mode != TZMODE_UTC && offset % 60 != 0;
    if (offset_seconds && in->s->rel.inspect.time_offset_seconds_unknown)
        return rbp_insp_why(in, "its UTC offset has seconds, which 3.0's Time#inspect prints in a form not checked");
    rbp_strbuf *b = in->out;
    /* strftime's %Y: at least 4 digits, 5 with a sign */
    rbp_sb_printf(b, y >= 0 ? "%04" PRId64 : "%05" PRId64, y);
    rbp_sb_printf(b, "-%02u-%02u %02u:%02u:%02u", (unsigned)mon, (unsigned)mday, (unsigned)hour, (unsigned)min,
                  (unsigned)sec);
    int64_t sub = ns % TIME_SCALE; /* wmod: the floor modulo, never negative */
    if (sub < 0) sub += TIME_SCALE;
    if (sub) {
        char digits[16];
        snprintf(digits, sizeof digits, ".%09" PRId64, sub);
        size_t n = strlen(digits);
        while (n > 1 && digits[n - 1] == '0') n--;
        rbp_sb_putn(b, digits, n);
    }
    if (mode == TZMODE_UTC) {
        rbp_sb_puts(b, " UTC");
    } else {
        char sign = offset < 0 ? '-' : '+';
        if (offset < 0) offset = -offset;
        int s = (int)(offset % 60), m = (int)(offset / 60 % 60);
        rbp_sb_printf(b, " %c%02d%02d", sign, (int)(offset / 3600), m);
        if (s && in->s->rel.inspect.time_offset_seconds) rbp_sb_printf(b, "%02d", s);
    }
    return true;
}
