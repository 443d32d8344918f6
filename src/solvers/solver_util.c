/* What the solvers share: default options, building schedules and curves,
 * measuring a schedule with the simulator, the time limit and progress.
 * The dispatcher (solve.c) depends on the solvers and the solvers on this
 * file, never back. */
#include <math.h>
#include <string.h>

#include "solvers_internal.h"

void remat_solve_options_init(remat_solve_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->algorithm = REMAT_ALG_OPTIMAL;
    o->slots = -1;
}

remat_status remat__push(remat_schedule *s, remat_op_kind kind, uint32_t index, remat_error *err) {
    remat_op op = {(uint8_t)kind, 0, index, 0};
    return remat_schedule_push(s, op, err);
}

remat_status remat__push_value(remat_schedule *s, remat_op_kind kind, remat_value_kind v,
                               uint32_t index, remat_error *err) {
    remat_op op = {(uint8_t)kind, (uint8_t)v, index, 0};
    return remat_schedule_push(s, op, err);
}

remat_status remat__schedule_measure(const remat_chain *c, remat_schedule *s, double bandwidth,
                                     remat_error *err) {
    remat_sim_options so;
    remat_sim_options_init(&so);
    so.bandwidth = bandwidth;
    remat_sim_result *r = NULL;
    REMAT__FORWARD(remat_simulate(c, s, &so, &r, err));
    remat_status st = REMAT_OK;
    if (!r->valid)
        st = remat__fail(err, REMAT_E_INTERNAL, "%s produced an invalid schedule: op %zu (%s): %s",
                         s->algorithm, r->failed_op, r->failed_op_text, r->reason);
    else {
        s->time = r->time;
        s->peak_bytes = r->peak_bytes;
    }
    remat_sim_result_free(r);
    return st;
}

double remat__max_seconds(const remat_solve_options *o) {
    if (o->max_seconds < 0) return INFINITY;
    return o->max_seconds > 0 ? o->max_seconds : REMAT_DEFAULT_MAX_SECONDS;
}

remat_status remat__check_time(const remat_solve_options *o, double seconds, const char *what,
                               const char *hint, remat_error *err) {
    double limit = remat__max_seconds(o);
    REMAT__RETURN_IF(!(seconds <= limit), err, REMAT_E_TOO_LARGE,
                     "%s: estimated to take about %.3g s, more than the limit of %.3g s; %s, or "
                     "raise the limit (--max-time, max_seconds)",
                     what, seconds, limit, hint);
    return REMAT_OK;
}

double remat__parallel_seconds(const remat_solve_options *o, double one_core_seconds) {
    unsigned k = remat__threads(o->threads), cores = remat__threads(0);
    if (k > cores) k = cores; /* more threads than cores run no faster */
    return one_core_seconds / (k > 1 ? 0.8 * k : 1.0);
}

void remat__progress(const remat_solve_options *o, double done, const char *what) {
    if (!o->progress) return;
    o->progress(o->progress_arg, done < 0 ? 0 : done > 1 ? 1 : done, what);
}

void remat_curve_free(remat_curve *curve) {
    if (!curve) return;
    free(curve->points);
    free(curve);
}
