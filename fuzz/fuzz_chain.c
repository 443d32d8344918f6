/* libFuzzer target: remat-chain-1 parsing, the JSON round trip and size text.
 * Fuzzers may abort on a broken property; the library itself must not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/json_util.h" /* the census behind the readers' memory bound */
#include "fuzz_common.h"

static int same_chain(const remat_chain *a, const remat_chain *b) {
    if (strcmp(a->name, b->name) || strcmp(a->time_unit, b->time_unit)) return 0;
    if (a->input_bytes != b->input_bytes || a->input_grad_bytes != b->input_grad_bytes) return 0;
    if (a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; i++) {
        const remat_stage *x = &a->stages[i], *y = &b->stages[i];
        if (strcmp(x->name, y->name) || x->fwd_time != y->fwd_time ||
            x->bwd_time != y->bwd_time || x->out_bytes != y->out_bytes ||
            x->saved_bytes != y->saved_bytes || x->grad_bytes != y->grad_bytes ||
            x->fwd_overhead != y->fwd_overhead || x->bwd_overhead != y->bwd_overhead ||
            x->fall_overhead != y->fall_overhead || x->has_fall_overhead != y->has_fall_overhead ||
            x->n_options != y->n_options)
            return 0;
        for (size_t k = 0; k < x->n_options; k++) {
            const remat_stage_option *o = &x->options[k], *q = &y->options[k];
            if (strcmp(o->name, q->name) || o->saved_bytes != q->saved_bytes ||
                o->fall_overhead != q->fall_overhead || o->bwd_time != q->bwd_time ||
                o->bwd_overhead != q->bwd_overhead || o->saved_bytes < x->out_bytes)
                return 0;
        }
    }
    return 1;
}

static void fuzz_size(const uint8_t *data, size_t size) {
    char text[64];
    size_t n = size < sizeof text - 1 ? size : sizeof text - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    uint64_t v = 0;
    remat_error e;
    remat_status st = remat_parse_size(text, &v, &e);
    if (st == REMAT_OK)
        CHECK(v < REMAT_MAX_BYTES);
    else
        check_error(st, &e);
}

static size_t tree_nodes(const cJSON *v) {
    size_t n = 1;
    for (const cJSON *m = v->child; m; m = m->next) n += tree_nodes(m);
    return n;
}

/* Whatever cJSON reads (with nothing but whitespace after it, as the
 * readers require), the census counted exactly its nodes, so that the bound
 * on the tree holds for the tree cJSON really builds. */
static void fuzz_census(const uint8_t *data, size_t size) {
    const char *text = (const char *)data, *end = NULL;
    cJSON *t = cJSON_ParseWithLengthOpts(text, size, &end, 0);
    if (!t) return;
    size_t rest = (size_t)(end - text);
    while (rest < size && text[rest] && strchr(" \t\r\n", text[rest])) rest++;
    if (rest < size) {
        cJSON_Delete(t);
        return;
    }
    size_t values = 0;
    (void)remat__json_tree_bytes((const char *)data, size, &values);
    CHECK(values == tree_nodes(t));
    cJSON_Delete(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_size(data, size);
    fuzz_census(data, size);

    remat_chain *c = NULL;
    remat_error e;
    remat_status st = remat_chain_from_json((const char *)data, size, "<fuzz>", &c, &e);
    if (st != REMAT_OK) {
        check_error(st, &e);
        CHECK(c == NULL);
        return 0;
    }
    CHECK(c && c->n >= 1);

    char *text = NULL;
    st = remat_chain_to_json(c, &text, &e);
    CHECK(st == REMAT_OK);
    remat_chain *c2 = NULL;
    st = remat_chain_from_json(text, strlen(text), "<round-trip>", &c2, &e);
    if (st != REMAT_OK) fprintf(stderr, "round trip: %s\n", e.message);
    CHECK(st == REMAT_OK);
    CHECK(same_chain(c, c2));
    char *text2 = NULL; /* the writer's output is a fixed point */
    CHECK(remat_chain_to_json(c2, &text2, &e) == REMAT_OK && strcmp(text, text2) == 0);
    remat_free(text2);

    uint64_t peak = 0;
    double time = 0;
    st = remat_store_all_cost(c, &peak, &time, &e);
    if (st != REMAT_OK) check_error(st, &e);

    remat_free(text);
    remat_chain_free(c2);
    remat_chain_free(c);
    return 0;
}
