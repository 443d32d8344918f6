/* PLACEHOLDER: replaced by the real solver. */
#include "solvers_internal.h"

remat_status remat__solve_optimal(const remat_chain *c, const remat_solve_options *o,
                                remat_schedule **out, remat_error *err) {
    (void)c; (void)o; (void)out;
    return remat__fail(err, REMAT_E_INPUT, "optimal: not implemented yet");
}

remat_status remat__curve_optimal(const remat_chain *c, const remat_solve_options *o,
                                  size_t max_points, remat_curve **out, remat_error *err) {
    (void)c; (void)o; (void)max_points; (void)out;
    return remat__fail(err, REMAT_E_INPUT, "optimal curve: not implemented yet");
}
