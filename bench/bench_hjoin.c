/* Heterogeneous join solver on towers of realistic size: CLIP-like two-tower
 * models and a triplet network, built here from per-layer sizes of the shape
 * a transformer block has (docs/join.md). For each: the solve time of the
 * join table (the whole curve from one table, 500 slots), the smallest limit
 * of the join solver, of optimal on the same network flattened to one chain
 * (remat_hjoin_flatten) and of per-layer checkpointing of every tower, and
 * the times at the per-layer limit. Prints a markdown table. `--quick` runs
 * the smaller cases. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "remat/remat.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define MB ((uint64_t)1 << 20)

/* A tower: an embedding stage then `blocks` transformer blocks of hidden
 * activation h MiB (the block output), keeping about 12 h for the backward
 * (attention scores, the 4x MLP), with a temporary peak of 4 h; times in ms
 * grow with h. The input is `input` MiB (token ids or pixels). */
typedef struct tower {
    const char *name;
    uint32_t blocks;
    double h, input;
} tower;

static void tower_stages(const tower *t, remat_stage *st) {
    uint64_t h = (uint64_t)(t->h * (double)MB);
    for (uint32_t i = 0; i <= t->blocks; i++) {
        remat_stage *s = &st[i];
        memset(s, 0, sizeof *s);
        snprintf(s->name, sizeof s->name, i ? "block%u" : "embed", i);
        s->out_bytes = h;
        s->grad_bytes = h;
        s->saved_bytes = i ? 12 * h : 2 * h;
        s->fwd_overhead = i ? 4 * h : h;
        s->bwd_overhead = i ? 6 * h : h;
        s->fwd_time = (i ? 1.0 : 0.3) * t->h / 4;
        s->bwd_time = 2 * s->fwd_time;
    }
}

static remat_hjoin *make_net(const char *name, const tower *towers, size_t k) {
    remat_stage *st[REMAT_HJOIN_MAX_BRANCHES] = {NULL};
    remat_hjoin_branch br[REMAT_HJOIN_MAX_BRANCHES];
    memset(br, 0, sizeof br);
    for (size_t j = 0; j < k; j++) {
        st[j] = calloc(towers[j].blocks + 1, sizeof *st[j]);
        if (!st[j]) abort();
        tower_stages(&towers[j], st[j]);
        snprintf(br[j].name, sizeof br[j].name, "%s", towers[j].name);
        br[j].input_bytes = (uint64_t)(towers[j].input * (double)MB);
        br[j].input_grad_bytes = 0;
        br[j].n = towers[j].blocks + 1;
        br[j].stages = st[j];
    }
    remat_stage turn;
    memset(&turn, 0, sizeof turn);
    snprintf(turn.name, sizeof turn.name, "contrastive loss");
    turn.fwd_time = 0.2;
    turn.bwd_time = 0.2;
    turn.fwd_overhead = 2 * MB;
    turn.bwd_overhead = 2 * MB;
    remat_hjoin *j = NULL;
    remat_error e;
    if (remat_hjoin_create(name, "ms", k, br, &turn, &j, &e) != REMAT_OK) {
        fprintf(stderr, "%s: %s\n", name, e.message);
        exit(1);
    }
    for (size_t q = 0; q < k; q++) free(st[q]);
    return j;
}

/* Per-layer checkpointing of every tower: each block's input kept, the
 * towers run one after another; after the turn each tower is replayed block
 * by block, last tower first. */
static remat_hjoin_schedule *per_layer(const remat_hjoin *j) {
    remat_hjoin_schedule *s = NULL;
    if (remat_hjoin_schedule_create("per-layer", &s, NULL) != REMAT_OK) abort();
    for (size_t b = 0; b < j->k; b++)
        for (uint32_t i = 1; i <= j->branches[b].n; i++)
            remat_hjoin_schedule_push(s, (remat_hjoin_op){REMAT_HJOIN_OP_FCK, (uint8_t)(b + 1), i},
                                      NULL);
    remat_hjoin_schedule_push(s, (remat_hjoin_op){REMAT_HJOIN_OP_T, 0, 0}, NULL);
    for (size_t b = j->k; b-- > 0;)
        for (uint32_t i = (uint32_t)j->branches[b].n; i >= 1; i--) {
            remat_hjoin_schedule_push(s, (remat_hjoin_op){REMAT_HJOIN_OP_FALL, (uint8_t)(b + 1), i},
                                      NULL);
            remat_hjoin_schedule_push(s, (remat_hjoin_op){REMAT_HJOIN_OP_B, (uint8_t)(b + 1), i},
                                      NULL);
        }
    return s;
}

static double mib(uint64_t b) { return (double)b / (double)MB; }

/* The best time of a curve within mem (INFINITY when none). */
static double curve_at(const remat_curve *cv, uint64_t mem) {
    double t = 1.0 / 0.0;
    for (size_t q = 0; q < cv->n; q++)
        if (cv->points[q].memory <= mem && cv->points[q].time < t) t = cv->points[q].time;
    return t;
}

static const char *write_dir;

static int run_case(const char *name, const char *file, const tower *towers, size_t k) {
    remat_hjoin *j = make_net(name, towers, k);
    if (write_dir) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.json", write_dir, file);
        remat_hjoin_save(j, path, NULL);
    }
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.max_seconds = -1;
    remat_error e;
    double t0 = now();
    clock_t c0 = clock();
    remat_curve *cv = NULL, *fcv = NULL;
    if (remat_hjoin_curve(j, &o, 0, &cv, &e) != REMAT_OK) {
        fprintf(stderr, "%s: %s\n", name, e.message);
        return 1;
    }
    double t1 = now(), cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
    remat_chain *flat = NULL;
    if (remat_hjoin_flatten(j, &flat, &e) != REMAT_OK ||
        remat_curve_compute(flat, &o, 0, &fcv, &e) != REMAT_OK) {
        fprintf(stderr, "%s flat: %s\n", name, e.message);
        return 1;
    }
    remat_hjoin_schedule *pl = per_layer(j);
    remat_hjoin_sim_result *r = NULL;
    if (remat_hjoin_simulate(j, pl, &r, &e) != REMAT_OK || !r->valid) {
        fprintf(stderr, "%s per-layer: invalid\n", name);
        return 1;
    }
    uint64_t peak = 0;
    double t_all = 0;
    remat_hjoin_store_all_cost(j, &peak, &t_all, NULL);
    char shape[64] = "";
    size_t len = 0;
    for (size_t b = 0; b < k; b++)
        len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%zu", b ? ", " : "",
                                j->branches[b].n);
    printf("| %s | (%s) | %.2f (%.2f) | %.1f | %.1f | %.1f | %.1f / %.1f | %.3f / %.3f / %.3f |\n",
           name, shape, t1 - t0, cpu, mib(peak), mib(cv->points[0].memory),
           mib(fcv->points[0].memory), mib(r->peak_bytes), r->time,
           curve_at(cv, r->peak_bytes) / t_all, curve_at(fcv, r->peak_bytes) / t_all,
           r->time / t_all);
    remat_hjoin_sim_result_free(r);
    remat_hjoin_schedule_free(pl);
    remat_curve_free(cv);
    remat_curve_free(fcv);
    remat_chain_free(flat);
    remat_hjoin_free(j);
    return 0;
}

int main(int argc, char **argv) {
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--write") == 0 && i + 1 < argc) write_dir = argv[++i];
    }
    const tower text = {"text", 12, 4.8, 0.02}, vit12 = {"vision", 12, 4.7, 18.4},
                vit24 = {"vision", 24, 4.7, 18.4}, cnn = {"embed", 12, 6.0, 18.4},
                text16 = {"text", 16, 4.8, 0.02}, vit16 = {"vision", 16, 4.7, 18.4};
    printf("| network | stages | curve, wall s (CPU s) | store-all (MiB) | join min (MiB) | flat-chain min "
           "(MiB) | per-layer peak (MiB) / time | time at the per-layer peak: join / flat / "
           "per-layer (x store-all) |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    int bad = 0;
    const tower clip[2] = {text, vit12}, clip24[2] = {text, vit24},
                trip[3] = {cnn, cnn, cnn}, three[3] = {text16, vit16, vit16};
    bad |= run_case("CLIP-like", "clip-like", clip, 2);
    bad |= run_case("CLIP-like, deep vision", "clip-like-deep", clip24, 2);
    bad |= run_case("triplet", "triplet-like", trip, 3);
    if (!quick) bad |= run_case("three towers", "three-towers", three, 3);
    return bad;
}
