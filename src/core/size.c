/* Size arguments: "123", "4GiB", "1.5G", "300 MB" (SPEC section 4).
 *
 * Grammar: DIGITS [ "." DIGITS ] [ " " ] [ SUFFIX ]. Suffixes (any letter case):
 * B = 1; K, KiB = 2^10; M, MiB = 2^20; G, GiB = 2^30; T, TiB = 2^40;
 * KB = 10^3; MB = 10^6; GB = 10^9; TB = 10^12. A fractional part needs a
 * suffix other than B (there are no fractional bytes); the result is then
 * rounded down to a whole byte, exactly (no floating point). */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

#define MAX_FRACTION_DIGITS 18 /* 10^18 < 2^63: the fraction fits in 64 bits */

typedef struct unit {
    const char *name;
    unsigned shift;    /* power of 2 when nonzero */
    unsigned decimals; /* power of 10 otherwise */
} unit;

static const unit units[] = {
    {"B", 0, 0},    {"K", 10, 0},  {"KiB", 10, 0}, {"KB", 0, 3},  {"M", 20, 0},
    {"MiB", 20, 0}, {"MB", 0, 6},  {"G", 30, 0},   {"GiB", 30, 0}, {"GB", 0, 9},
    {"T", 40, 0},   {"TiB", 40, 0}, {"TB", 0, 12},
};

static uint64_t pow10_u64(unsigned e) {
    uint64_t v = 1;
    while (e--) v *= 10;
    return v;
}

/* floor(frac / 10^digits * multiplier), exactly. */
static uint64_t fraction_bytes(uint64_t frac, unsigned digits, const unit *u) {
    uint64_t den = pow10_u64(digits);
    if (u->shift == 0) {
        if (u->decimals >= digits) return frac * pow10_u64(u->decimals - digits);
        return frac / pow10_u64(digits - u->decimals);
    }
    /* Binary expansion of frac/den, one bit per doubling; frac < den <= 10^18. */
    uint64_t v = 0;
    for (unsigned k = 0; k < u->shift; k++) {
        frac *= 2;
        v *= 2;
        if (frac >= den) {
            frac -= den;
            v += 1;
        }
    }
    return v;
}

remat_status remat_parse_size(const char *text, uint64_t *out, remat_error *err) {
    remat__clear(err);
    REMAT__RETURN_IF(!text || !out, err, REMAT_E_INPUT, "remat_parse_size: NULL argument");
    const char *p = text;
    REMAT__RETURN_IF(!isdigit((unsigned char)*p), err, REMAT_E_INPUT,
                     "size \"%.40s\": expected a number of bytes, optionally with a suffix "
                     "(K, M, G, KiB, MiB, GiB, KB, MB, GB)",
                     text);
    uint64_t whole = 0;
    for (; isdigit((unsigned char)*p); p++) {
        whole = whole * 10 + (uint64_t)(*p - '0');
        REMAT__RETURN_IF(whole >= REMAT_MAX_BYTES, err, REMAT_E_INPUT,
                         "size \"%.40s\": 2^53 bytes or more", text);
    }
    uint64_t frac = 0;
    unsigned digits = 0;
    if (*p == '.') {
        p++;
        REMAT__RETURN_IF(!isdigit((unsigned char)*p), err, REMAT_E_INPUT,
                         "size \"%.40s\": expected digits after the decimal point", text);
        for (; isdigit((unsigned char)*p); p++) {
            REMAT__RETURN_IF(digits == MAX_FRACTION_DIGITS, err, REMAT_E_INPUT,
                             "size \"%.40s\": more than %d decimal digits", text,
                             MAX_FRACTION_DIGITS);
            frac = frac * 10 + (uint64_t)(*p - '0');
            digits++;
        }
    }
    int spaced = *p == ' ';
    if (spaced) p++;
    const unit *u = &units[0];
    if (*p || spaced) {
        u = NULL;
        for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
            if (strcasecmp(p, units[k].name) == 0) u = &units[k];
        REMAT__RETURN_IF(!u, err, REMAT_E_INPUT,
                         "size \"%.40s\": unknown suffix \"%.16s\" (use K, M, G, KiB, MiB, GiB, "
                         "KB, MB, GB or none)",
                         text, p);
    }
    REMAT__RETURN_IF(digits > 0 && u == &units[0], err, REMAT_E_INPUT,
                     "size \"%.40s\": not a whole number of bytes", text);
    uint64_t mult = u->shift ? (uint64_t)1 << u->shift : pow10_u64(u->decimals);
    REMAT__RETURN_IF(whole > (REMAT_MAX_BYTES - 1) / mult, err, REMAT_E_INPUT,
                     "size \"%.40s\": 2^53 bytes or more", text);
    uint64_t v = whole * mult + fraction_bytes(frac, digits, u);
    REMAT__RETURN_IF(v >= REMAT_MAX_BYTES, err, REMAT_E_INPUT, "size \"%.40s\": 2^53 bytes or more",
                     text);
    *out = v;
    return REMAT_OK;
}
