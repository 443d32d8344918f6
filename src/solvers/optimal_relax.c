/* optimal's relax kernels: the inner loop of the table fill and of the
 * bounds pass, vectorised on x86 (SSE, or AVX when the processor has it). */
#include "optimal_internal.h"

/* out[i] = min(out[i], (c + a[i]) + b[i]), with a or b a row or a constant,
 * until out[i] <= stop: out falls with i and no candidate is below stop, so
 * nothing from there on improves. Returns where it stopped (len if it did
 * not). The check is per vector, so up to a vector's width more cells are
 * relaxed, which changes nothing. The scalar rebuild adds in the same order,
 * so it finds the stored values again. On x86 the loops use SSE, or AVX when
 * the processor has it. */
#define OPT_SCALAR(A, B)                                        \
    for (; i < len; i++) {                                      \
        if (o[i] <= stop) return i;                             \
        float v = (c + (A ? a[i] : ca)) + (B ? b[i] : cb);      \
        if (v < o[i]) o[i] = v;                                 \
    }                                                           \
    return len;

/* At the start of each block of OPT_SKIP cells: when o[i] is already at most
 * the candidate at the block's last cell, no cell of the block improves (o
 * and the candidate fall with i; float sums are monotone), so the block is
 * skipped, leaving i at its last vector (the loop adds the vector width W). */
#define OPT_SKIP 32
#define OPT_SKIPS(A, B, W, SKIP)                                                           \
    (SKIP && (A || B) && i % OPT_SKIP == 0 && len - i >= OPT_SKIP &&                       \
     o[i] <= (c + (A ? a[i + OPT_SKIP - 1] : ca)) + (B ? b[i + OPT_SKIP - 1] : cb) &&        \
     (i += OPT_SKIP - W, 1))

#if defined(__GNUC__) && !defined(REMAT_NO_SIMD) && \
    (defined(__x86_64__) || (defined(__i386__) && defined(__SSE2__)))
#include <immintrin.h>
#define OPT_X86 1
#define OPT_KERNEL(name, A, B, SKIP)                                                       \
    static size_t name(float *o, const float *a, const float *b, float ca, float cb, float c, \
                       size_t len, float stop) {                                           \
        __m128 vc = _mm_set1_ps(c), vca = _mm_set1_ps(ca), vcb = _mm_set1_ps(cb);         \
        size_t i = 0;                                                                      \
        if (len < 4) { OPT_SCALAR(A, B) }                                                  \
        for (;; i += 4) {                                                                  \
            if (i >= len) return len;                                                      \
            if (o[i] <= stop) return i; /* before this call relaxes o[i] */                \
            if (i + 4 > len) i = len - 4; /* redo an overlap: min is idempotent */         \
            else if (OPT_SKIPS(A, B, 4, SKIP)) continue;                                         \
            __m128 va = A ? _mm_loadu_ps(a + i) : vca, vb = B ? _mm_loadu_ps(b + i) : vcb; \
            __m128 v = _mm_add_ps(_mm_add_ps(vc, va), vb);                                 \
            _mm_storeu_ps(o + i, _mm_min_ps(v, _mm_loadu_ps(o + i)));                      \
        }                                                                                  \
    }                                                                                      \
    __attribute__((target("avx"))) static size_t name##_avx(                              \
        float *o, const float *a, const float *b, float ca, float cb, float c, size_t len, \
        float stop) {                                                                      \
        __m256 vc = _mm256_set1_ps(c), vca = _mm256_set1_ps(ca), vcb = _mm256_set1_ps(cb); \
        size_t i = 0;                                                                      \
        if (len < 8) { OPT_SCALAR(A, B) }                                                  \
        for (;; i += 8) {                                                                  \
            if (i >= len) return len;                                                      \
            if (o[i] <= stop) return i;                                                    \
            if (i + 8 > len) i = len - 8;                                                  \
            else if (OPT_SKIPS(A, B, 8, SKIP)) continue;                                         \
            __m256 va = A ? _mm256_loadu_ps(a + i) : vca;                                  \
            __m256 vb = B ? _mm256_loadu_ps(b + i) : vcb;                                  \
            __m256 v = _mm256_add_ps(_mm256_add_ps(vc, va), vb);                           \
            _mm256_storeu_ps(o + i, _mm256_min_ps(v, _mm256_loadu_ps(o + i)));            \
        }                                                                                  \
    }
#else
#define OPT_KERNEL(name, A, B, SKIP)                                                       \
    static size_t name(float *o, const float *a, const float *b, float ca, float cb, float c, \
                       size_t len, float stop) {                                           \
        size_t i = 0;                                                                      \
        OPT_SCALAR(A, B)                                                                   \
    }
#endif
OPT_KERNEL(kern_rr, 1, 1, 1)
OPT_KERNEL(kern_rc, 1, 0, 1)
OPT_KERNEL(kern_cr, 0, 1, 1)
OPT_KERNEL(kern_cc, 0, 0, 1)
/* The bounds pass pushes along rows that do not fall: no skipping. */
OPT_KERNEL(kern_push_rr, 1, 1, 0)
OPT_KERNEL(kern_push_rc, 1, 0, 0)

void remat__opt_pick_kernels(opt_kernel *k) {
    k[0] = kern_rr; k[1] = kern_rc; k[2] = kern_cr; k[3] = kern_cc;
    k[4] = kern_push_rr; k[5] = kern_push_rc;
#ifdef OPT_X86
    if (__builtin_cpu_supports("avx")) {
        k[0] = kern_rr_avx; k[1] = kern_rc_avx; k[2] = kern_cr_avx; k[3] = kern_cc_avx;
        k[4] = kern_push_rr_avx; k[5] = kern_push_rc_avx;
    }
#endif
}

/* row[m - rlo] = min(row, (c + A(m - w)) + B(m)) for m in [m0, m1), split into
 * stretches where A and B are each either a row or their constant tail, until
 * the row is at most stop (see the kernels). */
void remat__opt_relax(const opt_ctx *x, float *row, uint64_t rlo, uint64_t m0, uint64_t m1, float c,
                      const opt_view *A, uint64_t w, const opt_view *B, float stop) {
    uint64_t m = m0;
    while (m < m1) {
        int ar = m - w < A->hi, br = m < B->hi;
        uint64_t end = m1;
        if (ar && A->hi + w < end) end = A->hi + w;
        if (br && B->hi < end) end = B->hi;
        size_t len = (size_t)(end - m);
        float *o = row + (m - rlo);
        const float *pa = ar ? A->row + (m - w - A->lo) : NULL;
        const float *pb = br ? B->row + (m - B->lo) : NULL;
        size_t done = x->kern[(ar ? 0 : 2) + (br ? 0 : 1)](o, pa, pb, A->tail, B->tail, c, len,
                                                           stop);
        if (done < len) return;
        m = end;
    }
}
