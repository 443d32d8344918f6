/* PLACEHOLDER: replaced by the real solver. */
#include "solvers_internal.h"

remat_status remat__solve_sequential(const remat_chain *c, const remat_solve_options *o,
                                remat_schedule **out, remat_error *err) {
    (void)c; (void)o; (void)out;
    return remat__fail(err, REMAT_E_INPUT, "sequential: not implemented yet");
}
