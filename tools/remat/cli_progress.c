/* The progress line of long steps on stderr (solve, curve, info). */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_common.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Shown when forced, or on a terminal once the step looks like it takes
 * more than about 2 s (from the time so far and the share done). */
static int worth_showing(const cli_progress *p, double elapsed, double done) {
    if (p->mode > 0) return 1;
    if (p->mode < 0 || !p->tty || elapsed < 0.5) return 0;
    return elapsed >= 2 || (done > 0 && elapsed / done > 2);
}

static void on_progress(void *arg, double done, const char *what) {
    cli_progress *p = arg;
    double t = now_s(), elapsed = t - p->start;
    if (!p->shown && !worth_showing(p, elapsed, done)) return;
    int pct = (int)(done * 100 + 0.5);
    /* at most ~20 lines a second, and always the step's last one */
    if (p->shown && pct == p->last_pct && strcmp(what, p->last_what) == 0) return;
    if (p->shown && t - p->last_print < 0.05 && pct < 100 && strcmp(what, p->last_what) == 0)
        return;
    fprintf(stderr, "\rremat: %-28.28s %3d%% (%.1f s)", what, pct, elapsed);
    fflush(stderr);
    p->shown = 1;
    p->last_pct = pct;
    p->last_print = t;
    snprintf(p->last_what, sizeof p->last_what, "%s", what);
}

void cli_progress_start(cli_progress *p, remat_solve_options *o) {
    p->start = now_s();
    p->tty = isatty(STDERR_FILENO);
    p->shown = 0;
    p->last_pct = -1;
    p->last_print = 0;
    p->last_what[0] = '\0';
    o->progress = on_progress;
    o->progress_arg = p;
}

void cli_progress_end(cli_progress *p) {
    if (p->shown) fputc('\n', stderr);
    p->shown = 0;
}
