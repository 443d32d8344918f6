/* The timed simulator for schedules with Off/Pre/Wait (SPEC section 2,
 * Offloading). PLACEHOLDER until the pofo work lands: it rejects such schedules. */
#include <stdio.h>

#include "sim_core.h"

remat_status remat__simulate_timed(const remat_chain *c, const remat_schedule *s,
                                   const remat_sim_options *opt, remat_sim_result *r,
                                   remat_error *err) {
    (void)c;
    (void)opt;
    (void)s;
    (void)r;
    return remat__fail(err, REMAT_E_INPUT, "offload simulation is not implemented yet");
}
