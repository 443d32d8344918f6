/* JSON documents (chain and schedule) and size arguments: round trips, the
 * example files, and every class of bad input, each checked for its status and
 * for a message that names the field. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/testlib.h"
#include "core/json_util.h"
#include "test.h"

/* ------------------------------------------------------------ helpers */

static remat_status chain_text(const char *text, remat_chain **c, remat_error *e) {
    return remat_chain_from_json(text, strlen(text), "t.json", c, e);
}

static int chains_equal(const remat_chain *a, const remat_chain *b) {
    if (strcmp(a->name, b->name) || strcmp(a->time_unit, b->time_unit) ||
        a->input_bytes != b->input_bytes || a->input_grad_bytes != b->input_grad_bytes ||
        a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++) {
        const remat_stage *x = &a->stages[i], *y = &b->stages[i];
        if (strcmp(x->name, y->name) || memcmp(&x->fwd_time, &y->fwd_time, sizeof(double)) ||
            memcmp(&x->bwd_time, &y->bwd_time, sizeof(double)) || x->out_bytes != y->out_bytes ||
            x->saved_bytes != y->saved_bytes || x->grad_bytes != y->grad_bytes ||
            x->fwd_overhead != y->fwd_overhead || x->bwd_overhead != y->bwd_overhead ||
            x->fall_overhead != y->fall_overhead || x->has_fall_overhead != y->has_fall_overhead ||
            x->n_options != y->n_options ||
            /* a stop field is read only where its flag is set */
            x->has_stop_time != y->has_stop_time ||
            (x->has_stop_time && memcmp(&x->stop_time, &y->stop_time, sizeof(double))) ||
            x->has_stop_saved_bytes != y->has_stop_saved_bytes ||
            (x->has_stop_saved_bytes && x->stop_saved_bytes != y->stop_saved_bytes) ||
            x->has_stop_overhead != y->has_stop_overhead ||
            (x->has_stop_overhead && x->stop_overhead != y->stop_overhead))
            return 0;
        for (size_t k = 0; k < x->n_options; k++) {
            const remat_stage_option *o = &x->options[k], *q = &y->options[k];
            if (strcmp(o->name, q->name) || o->saved_bytes != q->saved_bytes ||
                o->fall_overhead != q->fall_overhead || o->bwd_overhead != q->bwd_overhead ||
                memcmp(&o->bwd_time, &q->bwd_time, sizeof(double)))
                return 0;
        }
    }
    return 1;
}

/* t, c as written, reads back to c, and that chain writes the same bytes. */
static void json_round_trip(const remat_chain *c, const char *t) {
    remat_chain *d = NULL;
    char *t2 = NULL;
    remat_error e;
    ASSERT_STATUS(remat_chain_from_json(t, strlen(t), "rt", &d, &e), REMAT_OK);
    ASSERT_TRUE(chains_equal(c, d));
    ASSERT_STATUS(remat_chain_to_json(d, &t2, &e), REMAT_OK);
    ASSERT_TRUE(strcmp(t, t2) == 0);
    remat_free(t2);
    remat_chain_free(d);
}

/* A writable temporary path; the caller unlinks it. */
static void temp_path(char *buf, size_t cap) {
    snprintf(buf, cap, "/tmp/remat-test-json-XXXXXX");
    int fd = mkstemp(buf);
    if (fd >= 0) close(fd);
}

#define HEAD "{\"format\": \"remat-chain-1\", \"input_bytes\": 10, \"stages\": ["
#define LOSS "{\"fwd_time\": 1, \"bwd_time\": 1, \"out_bytes\": 1, \"saved_bytes\": 1}"
#define ST(extra) "{\"fwd_time\": 1, \"bwd_time\": 2, \"out_bytes\": 5, \"saved_bytes\": 9" extra "}"

static const char tiny[] =
    "{\"format\": \"remat-chain-1\", \"name\": \"tiny\", \"time_unit\": \"ms\",\n"
    " \"input_bytes\": 10, \"stages\": [\n"
    "  {\"name\": \"s1\", \"fwd_time\": 1.5, \"bwd_time\": 2, \"out_bytes\": 20, \"saved_bytes\": 50,\n"
    "   \"grad_bytes\": 25, \"fwd_overhead\": 3, \"bwd_overhead\": 4},\n"
    "  {\"fwd_time\": 0.1, \"bwd_time\": 0.2, \"out_bytes\": 1, \"saved_bytes\": 21}\n"
    "]}";

/* ------------------------------------------------------------ chains */

static void chain_fields_and_defaults(void) {
    remat_chain *c = NULL;
    remat_error e;
    ASSERT_STATUS(chain_text(tiny, &c, &e), REMAT_OK);
    ASSERT_TRUE(strcmp(c->name, "tiny") == 0);
    ASSERT_TRUE(strcmp(c->time_unit, "ms") == 0);
    ASSERT_EQ_U64(c->input_bytes, 10);
    ASSERT_EQ_U64(c->input_grad_bytes, 10); /* defaults to input_bytes */
    ASSERT_EQ_U64(c->n, 2);
    ASSERT_TRUE(strcmp(c->stages[0].name, "s1") == 0);
    ASSERT_NEAR(c->stages[0].fwd_time, 1.5, 0);
    ASSERT_EQ_U64(c->stages[0].grad_bytes, 25);
    ASSERT_EQ_U64(c->stages[0].fwd_overhead, 3);
    ASSERT_EQ_U64(c->stages[0].bwd_overhead, 4);
    ASSERT_TRUE(c->stages[1].name[0] == '\0');
    ASSERT_EQ_U64(c->stages[1].fwd_overhead, 0);
    ASSERT_EQ_U64(c->stages[1].bwd_overhead, 0);
    ASSERT_EQ_U64(remat_chain_d_bytes(c, 2), 0); /* the seed */
    remat_chain_free(c);

    /* grad_bytes defaults to out_bytes; unknown fields and a repeated format are fine */
    const char *t = "{\"format\": \"remat-chain-1\", \"format\": \"remat-chain-1\", \"extra\": [1, {}],"
                    " \"input_bytes\": 8, \"input_grad_bytes\": 3, \"stages\": ["
                    "{\"fwd_time\": 0, \"bwd_time\": 0, \"out_bytes\": 7, \"saved_bytes\": 7, \"x\": null},"
                    "{\"fwd_time\": 1e-3, \"bwd_time\": 2E2, \"out_bytes\": 4, \"saved_bytes\": 4.0}]}";
    ASSERT_STATUS(chain_text(t, &c, &e), REMAT_OK);
    ASSERT_EQ_U64(c->input_grad_bytes, 3);
    ASSERT_EQ_U64(c->stages[0].grad_bytes, 7);
    ASSERT_EQ_U64(c->stages[1].saved_bytes, 4);
    ASSERT_NEAR(c->stages[1].bwd_time, 200, 0);
    remat_chain_free(c);

    /* times that add up to infinity are refused at load */
    t = HEAD ST("") "," LOSS "]}";
    ASSERT_STATUS(chain_text(t, &c, &e), REMAT_OK);
    remat_chain_free(c);
    t = HEAD "{\"fwd_time\": 1.7976931348623157e308, \"bwd_time\": 1.7976931348623157e308, "
             "\"out_bytes\": 1, \"saved_bytes\": 1}]}";
    ASSERT_STATUS(chain_text(t, &c, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "t.json: stages: the times (fwd_time + bwd_time) add up to inf");

    /* a repeated key: the first one counts */
    t = HEAD ST(", \"saved_bytes\": 4") "]}";
    ASSERT_STATUS(chain_text(t, &c, &e), REMAT_OK);
    ASSERT_EQ_U64(c->stages[0].saved_bytes, 9);
    remat_chain_free(c);
}

static void chain_round_trip(void) {
    remat_chain *c = NULL, *d = NULL;
    char *t1 = NULL, *t2 = NULL;
    ASSERT_STATUS(chain_text(tiny, &c, NULL), REMAT_OK);
    /* awkward times must come back bit for bit */
    c->stages[0].fwd_time = 0.1 + 0.2;
    c->stages[0].bwd_time = 1.0 / 3.0;
    c->stages[1].fwd_time = 5e-324;
    c->stages[1].bwd_time = 1.2345678901234567e307; /* x 5 stages: under DBL_MAX / 2 */
    remat__strlcpy(c->name, "quote\" back\\ tab\t nl\n", sizeof c->name);
    c->stages[1].out_bytes = REMAT_MAX_BYTES - 1;
    c->stages[1].saved_bytes = REMAT_MAX_BYTES - 1;
    ASSERT_STATUS(remat_chain_to_json(c, &t1, NULL), REMAT_OK);
    ASSERT_CONTAINS(t1, "\"format\": \"remat-chain-1\"");
    ASSERT_CONTAINS(t1, "9007199254740991");
    ASSERT_STATUS(remat_chain_from_json(t1, strlen(t1), "t1", &d, NULL), REMAT_OK);
    ASSERT_TRUE(chains_equal(c, d));
    ASSERT_STATUS(remat_chain_to_json(d, &t2, NULL), REMAT_OK);
    ASSERT_TRUE(strcmp(t1, t2) == 0);
    remat_free(t1);
    remat_free(t2);
    remat_chain_free(c);
    remat_chain_free(d);
}

static void chain_random_round_trips(void) {
    test_rng rng = {42};
    for (int k = 0; k < 30; k++) {
        test_chain_spec sp = {1 + (size_t)test_rng_range(&rng, 0, 40), (uint64_t)1 << 50, k & 1,
                              k & 2, k & 4, k & 8};
        remat_chain *c = test_random_chain(&rng, &sp), *d = NULL;
        char *t = NULL;
        ASSERT_STATUS(remat_chain_to_json(c, &t, NULL), REMAT_OK);
        ASSERT_STATUS(remat_chain_from_json(t, strlen(t), "rt", &d, NULL), REMAT_OK);
        int same = chains_equal(c, d);
        remat_free(t);
        remat_chain_free(c);
        remat_chain_free(d);
        ASSERT_TRUE(same);
    }
}

/* The generated examples are written in exactly the writer's layout. */
static void examples_round_trip_byte_for_byte(void) {
    const char *files[] = {"examples/tiny.json", "examples/resnet18-like.json",
                           "examples/resnet50-b16-500.json", "examples/resnet101-b16-500.json",
                           "examples/densenet121-b16-500.json", "examples/inception3-b16-500.json",
                           "examples/resnet1001-like.json", "examples/densenet121-thesis.json"};
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        remat_chain *c = NULL;
        remat_error e;
        remat_status s = remat_chain_load(files[k], &c, &e);
        if (s != REMAT_OK) TEST_FAIL_("%s", e.message);
        char *text = NULL, *orig = NULL;
        size_t len;
        ASSERT_STATUS(remat_chain_to_json(c, &text, NULL), REMAT_OK);
        ASSERT_STATUS(remat_read_file(files[k], &orig, &len, NULL), REMAT_OK);
        int same = strcmp(text, orig) == 0;
        size_t n = c->n;
        remat_free(text);
        free(orig);
        remat_chain_free(c);
        if (!same) TEST_FAIL_("%s: writer output differs from the file", files[k]);
        ASSERT_TRUE(n >= 4);
    }
}

static void chain_save_and_load(void) {
    remat_chain *c = NULL, *d = NULL;
    ASSERT_STATUS(chain_text(tiny, &c, NULL), REMAT_OK);
    char path[64];
    temp_path(path, sizeof path);
    ASSERT_STATUS(remat_chain_save(c, path, NULL), REMAT_OK);
    remat_status s = remat_chain_load(path, &d, NULL);
    unlink(path);
    ASSERT_STATUS(s, REMAT_OK);
    ASSERT_TRUE(chains_equal(c, d));
    remat_chain_free(c);
    remat_chain_free(d);

    remat_error e;
    d = (remat_chain *)1;
    ASSERT_STATUS(remat_chain_load("/nonexistent/dir/x.json", &d, &e), REMAT_E_IO);
    ASSERT_TRUE(d == NULL);
    ASSERT_CONTAINS(e.message, "/nonexistent/dir/x.json");
    ASSERT_STATUS(remat_chain_load("/tmp", &d, &e), REMAT_E_IO);
    ASSERT_STATUS(remat_chain_save(NULL, path, &e), REMAT_E_INPUT);
}

typedef struct bad_case {
    const char *text;
    const char *needle; /* must appear in the message, after "t.json: " */
} bad_case;


static const bad_case bad_chains[] = {
    /* malformed documents, with their position */
    {"", "line 1, column 1: malformed JSON"},
    {"{\"format\": \"remat-chain-1\",", "line 1, column 2"},
    {"{\n  \"format\": remat\n}", "line 2, column 13: malformed JSON"},
    {HEAD LOSS "]} x", "line 1, column 126: text after the end"},
    {"[1, 2]", "expected a JSON object at the top level, got an array"},
    {"\"remat-chain-1\"", "expected a JSON object at the top level, got a string"},
    /* format */
    {"{\"input_bytes\": 10, \"stages\": [" LOSS "]}", "format: missing required field"},
    {"{\"format\": 1, \"input_bytes\": 10, \"stages\": [" LOSS "]}", "format: expected a string, got a number"},
    {"{\"format\": \"remat-chain-2\", \"input_bytes\": 10, \"stages\": [" LOSS "]}", "format: \"remat-chain-2\" is not \"remat-chain-1\""},
    {"{\"format\": \"remat-schedule-1\", \"ops\": []}", "format: \"remat-schedule-1\" is not"},
    /* top-level fields */
    {"{\"format\": \"remat-chain-1\", \"stages\": [" LOSS "]}", "input_bytes: missing required field"},
    {"{\"format\": \"remat-chain-1\", \"input_bytes\": \"10\", \"stages\": [" LOSS "]}", "input_bytes: expected a number, got a string"},
    {"{\"format\": \"remat-chain-1\", \"input_bytes\": -1, \"stages\": [" LOSS "]}", "input_bytes: negative size -1"},
    {"{\"format\": \"remat-chain-1\", \"input_bytes\": 2.5, \"stages\": [" LOSS "]}", "input_bytes: size 2.5 is not a whole number of bytes"},
    {"{\"format\": \"remat-chain-1\", \"input_bytes\": 9007199254740992, \"stages\": [" LOSS "]}", "input_bytes: size 9007199254740992 is 2^53 or more"},
    {"{\"format\": \"remat-chain-1\", \"input_bytes\": 1e999, \"stages\": [" LOSS "]}", "input_bytes: not a finite number"},
    {"{\"format\": \"remat-chain-1\", \"input_bytes\": -1e999, \"stages\": [" LOSS "]}", "input_bytes: not a finite number"},
    {"{\"format\": \"remat-chain-1\", \"input_bytes\": 1, \"input_grad_bytes\": -3, \"stages\": [" LOSS "]}", "input_grad_bytes: negative size"},
    {"{\"format\": \"remat-chain-1\", \"input_bytes\": 1, \"input_grad_bytes\": null, \"stages\": [" LOSS "]}", "input_grad_bytes: expected a number, got null"},
    {"{\"format\": \"remat-chain-1\", \"name\": 7, \"input_bytes\": 1, \"stages\": [" LOSS "]}", "name: expected a string, got a number"},
    {"{\"format\": \"remat-chain-1\", \"time_unit\": \"a time unit longer than 31 bytes\", \"input_bytes\": 1, \"stages\": [" LOSS "]}", "time_unit: 32 bytes long, more than the limit of 31"},
    /* stages */
    {"{\"format\": \"remat-chain-1\", \"input_bytes\": 10}", "stages: missing required field"},
    {"{\"format\": \"remat-chain-1\", \"input_bytes\": 10, \"stages\": {}}", "stages: expected an array, got an object"},
    {HEAD "]}", "stages: empty"},
    {HEAD "1]}", "stages[0]: expected an object, got a number"},
    {HEAD ST("") ", [], " LOSS "]}", "stages[1]: expected an object, got an array"},
    {HEAD ST("") ", {\"bwd_time\": 1, \"out_bytes\": 1, \"saved_bytes\": 1}]}", "stages[1].fwd_time: missing required field"},
    {HEAD "{\"fwd_time\": 1, \"out_bytes\": 1, \"saved_bytes\": 1}]}", "stages[0].bwd_time: missing required field"},
    {HEAD "{\"fwd_time\": 1, \"bwd_time\": 1, \"saved_bytes\": 1}]}", "stages[0].out_bytes: missing required field"},
    {HEAD "{\"fwd_time\": 1, \"bwd_time\": 1, \"out_bytes\": 1}]}", "stages[0].saved_bytes: missing required field"},
    {HEAD "{\"fwd_time\": \"1\", \"bwd_time\": 1, \"out_bytes\": 1, \"saved_bytes\": 1}]}", "stages[0].fwd_time: expected a number, got a string"},
    {HEAD "{\"fwd_time\": 1, \"bwd_time\": -0.5, \"out_bytes\": 1, \"saved_bytes\": 1}]}", "stages[0].bwd_time: negative time -0.5"},
    {HEAD "{\"fwd_time\": 1e400, \"bwd_time\": 1, \"out_bytes\": 1, \"saved_bytes\": 1}]}", "stages[0].fwd_time: not a finite number"},
    {HEAD ST("") ", " ST("") ", " ST("") ", {\"fwd_time\": 1, \"bwd_time\": 1, \"out_bytes\": -5, \"saved_bytes\": 1}]}", "stages[3].out_bytes: negative size -5"},
    {HEAD "{\"fwd_time\": 1, \"bwd_time\": 1, \"out_bytes\": 6, \"saved_bytes\": 5}]}", "stages[0].saved_bytes: 5 is less than out_bytes 6"},
    {HEAD ST(", \"grad_bytes\": 9007199254740992") "," LOSS "]}", "stages[0].grad_bytes: size 9007199254740992 is 2^53 or more"},
    {HEAD ST(", \"grad_bytes\": true") "," LOSS "]}", "stages[0].grad_bytes: expected a number, got a boolean"},
    {HEAD ST(", \"fwd_overhead\": 0.5") "," LOSS "]}", "stages[0].fwd_overhead: size 0.5 is not a whole number"},
    {HEAD ST("") "," ST(", \"bwd_overhead\": -1") "]}", "stages[1].bwd_overhead: negative size"},
    {HEAD ST(", \"name\": [\"x\"]") "]}", "stages[0].name: expected a string, got an array"},
};

/* The optional stage fields: fall_overhead and partial saves (options). */
#define OPT(extra) "{\"saved_bytes\": 6, \"bwd_time\": 3" extra "}"

static const char with_options[] =
    HEAD ST(", \"fwd_overhead\": 4, \"fall_overhead\": 0, \"options\": ["
            "{\"name\": \"matmuls\", \"saved_bytes\": 7, \"bwd_time\": 2.5, "
            "\"fall_overhead\": 1, \"bwd_overhead\": 2}, " OPT("") "]")
    ", " ST(", \"options\": []") ", " LOSS "]}";

static void chain_options(void) {
    remat_chain *c = NULL;
    remat_error e;
    ASSERT_STATUS(chain_text(with_options, &c, &e), REMAT_OK);
    const remat_stage *s = &c->stages[0];
    ASSERT_EQ_INT(s->has_fall_overhead, 1);
    ASSERT_EQ_U64(s->fall_overhead, 0);
    ASSERT_EQ_U64(s->fwd_overhead, 4);
    ASSERT_EQ_U64(s->n_options, 2);
    ASSERT_TRUE(strcmp(s->options[0].name, "matmuls") == 0);
    ASSERT_EQ_U64(s->options[0].saved_bytes, 7);
    ASSERT_NEAR(s->options[0].bwd_time, 2.5, 0);
    ASSERT_EQ_U64(s->options[0].fall_overhead, 1);
    ASSERT_EQ_U64(s->options[0].bwd_overhead, 2);
    /* an option's overheads default to 0, its name to "" */
    ASSERT_TRUE(s->options[1].name[0] == '\0');
    ASSERT_EQ_U64(s->options[1].fall_overhead, 0);
    ASSERT_EQ_U64(s->options[1].bwd_overhead, 0);
    /* without the field, Fall takes fwd_overhead; an empty list is no options */
    ASSERT_EQ_INT(c->stages[1].has_fall_overhead, 0);
    ASSERT_EQ_U64(c->stages[1].fall_overhead, c->stages[1].fwd_overhead);
    ASSERT_EQ_U64(c->stages[1].n_options, 0);
    ASSERT_TRUE(c->stages[1].options == NULL);
    /* the writer writes the fields only where present; its output reads back
     * to the same chain and writes the same bytes */
    char *t = NULL;
    ASSERT_STATUS(remat_chain_to_json(c, &t, &e), REMAT_OK);
    ASSERT_CONTAINS(t, "\"fwd_overhead\": 4, \"bwd_overhead\": 0, \"fall_overhead\": 0, "
                       "\"options\": [{\"name\": \"matmuls\", \"saved_bytes\": 7, "
                       "\"fall_overhead\": 1, \"bwd_time\": 2.5, \"bwd_overhead\": 2}, ");
    const char *second = strstr(t, "\n    {");
    ASSERT_TRUE(second && !strstr(strstr(second + 1, "\n"), "fall_overhead"));
    ASSERT_TRUE(!strstr(strstr(second + 1, "\n"), "options"));
    json_round_trip(c, t);
    if (test_failed_) return;
    remat_free(t);
    remat_chain_free(c);
    /* options on the loss stage are allowed too (its B may recompute) */
    const char *loss = HEAD ST("") ", {\"fwd_time\": 1, \"bwd_time\": 1, \"out_bytes\": 1, "
                       "\"saved_bytes\": 9, \"options\": [" OPT("") "]}]}";
    ASSERT_STATUS(chain_text(loss, &c, &e), REMAT_OK);
    ASSERT_EQ_U64(c->stages[1].n_options, 1);
    remat_chain_free(c);
}

/* The stopped Fall's fields: read, defaults, written only where present,
 * round trip; each bad value named. */
static void chain_stops(void) {
    const char *text = HEAD ST(", \"fall_overhead\": 3, \"stop_time\": 0.5, "
                               "\"stop_saved_bytes\": 2, \"stop_overhead\": 11")
        ", " ST(", \"stop_saved_bytes\": 9") ", " ST("") ", " LOSS "]}";
    remat_chain *c = NULL;
    remat_error e;
    ASSERT_STATUS(chain_text(text, &c, &e), REMAT_OK);
    const remat_stage *s = c->stages;
    ASSERT_NEAR(s[0].stop_time, 0.5, 0);
    ASSERT_EQ_U64(s[0].stop_saved_bytes, 2); /* below out_bytes 5: allowed */
    ASSERT_EQ_U64(s[0].stop_overhead, 11);   /* above fall_overhead: allowed */
    ASSERT_TRUE(s[0].has_stop_time && s[0].has_stop_saved_bytes && s[0].has_stop_overhead);
    /* defaults: fwd_time, saved_bytes, fall_overhead (itself fwd_overhead by default) */
    ASSERT_EQ_INT(s[1].has_stop_time, 0);
    ASSERT_NEAR(s[1].stop_time, 1, 0);
    ASSERT_EQ_U64(s[1].stop_saved_bytes, 9);
    ASSERT_EQ_INT(s[2].has_stop_saved_bytes, 0);
    ASSERT_EQ_U64(s[2].stop_saved_bytes, 9);
    ASSERT_EQ_U64(s[2].stop_overhead, 0);
    char *t = NULL;
    ASSERT_STATUS(remat_chain_to_json(c, &t, &e), REMAT_OK);
    ASSERT_CONTAINS(t, "\"fall_overhead\": 3, \"stop_time\": 0.5, \"stop_saved_bytes\": 2, "
                       "\"stop_overhead\": 11}");
    ASSERT_CONTAINS(t, "\"bwd_overhead\": 0, \"stop_saved_bytes\": 9}");
    const char *third = strstr(strstr(strstr(t, "\n    {") + 1, "\n    {") + 1, "\n    {");
    ASSERT_TRUE(third && !strstr(third, "stop_"));
    json_round_trip(c, t);
    if (test_failed_) return;
    remat_free(t);
    remat_chain_free(c);
    static const struct { const char *text, *msg; } bad[] = {
        {HEAD ST(", \"stop_time\": 1.5") ", " LOSS "]}",
         "t.json: stages[0].stop_time: 1.5 is more than fwd_time 1"},
        {HEAD ST(", \"stop_time\": -1") ", " LOSS "]}", "stages[0].stop_time: negative time"},
        {HEAD ST(", \"stop_saved_bytes\": 10") ", " LOSS "]}",
         "t.json: stages[0].stop_saved_bytes: 10 is more than saved_bytes 9"},
        {HEAD ST(", \"stop_overhead\": -1") ", " LOSS "]}",
         "stages[0].stop_overhead: negative size"},
        {HEAD ST(", \"stop_overhead\": 9007199254740992") ", " LOSS "]}",
         "stages[0].stop_overhead: size 9007199254740992 is 2^53 or more"},
        {HEAD ST(", \"stop_time\": \"x\"") ", " LOSS "]}",
         "stages[0].stop_time: expected a number, got a string"},
        {HEAD ST("") ", {\"fwd_time\": 1, \"bwd_time\": 1, \"out_bytes\": 1, \"saved_bytes\": 1, "
                      "\"stop_time\": 1}]}",
         "t.json: stages[1].stop_time: the loss stage (the last) has no stopped Fall"},
        {HEAD "{\"fwd_time\": 1, \"bwd_time\": 1, \"out_bytes\": 1, \"saved_bytes\": 1, "
              "\"stop_overhead\": 0}]}",
         "stages[0].stop_overhead: the loss stage (the last) has no stopped Fall"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        ASSERT_STATUS(chain_text(bad[k].text, &c, &e), REMAT_E_INPUT);
        ASSERT_CONTAINS(e.message, bad[k].msg);
        ASSERT_TRUE(c == NULL);
    }
}

static void chain_options_random_round_trips(void) {
    test_rng rng = {4711};
    for (int k = 0; k < 40; k++) {
        test_chain_spec sp = {1 + (size_t)test_rng_range(&rng, 0, 30), (uint64_t)1 << 40, k & 1,
                              k & 2, k & 4, k & 8};
        test_option_spec x = {1, 1 + (size_t)(k % REMAT_MAX_OPTIONS)};
        remat_chain *c = test_random_chain_with(&rng, &sp, &x), *d = NULL;
        char *t = NULL, *t2 = NULL;
        ASSERT_STATUS(remat_chain_to_json(c, &t, NULL), REMAT_OK);
        ASSERT_STATUS(remat_chain_from_json(t, strlen(t), "rt", &d, NULL), REMAT_OK);
        ASSERT_STATUS(remat_chain_to_json(d, &t2, NULL), REMAT_OK);
        int same = chains_equal(c, d) && strcmp(t, t2) == 0;
        remat_free(t);
        remat_free(t2);
        remat_chain_free(c);
        remat_chain_free(d);
        ASSERT_TRUE(same);
    }
}

static const bad_case bad_options[] = {
    {HEAD ST(", \"options\": {}") "]}", "stages[0].options: expected an array, got an object"},
    {HEAD ST(", \"options\": [3]") "]}", "stages[0].options[0]: expected an object, got a number"},
    {HEAD ST(", \"options\": [{\"bwd_time\": 1}]") "]}",
     "stages[0].options[0].saved_bytes: missing required field"},
    {HEAD ST(", \"options\": [" OPT("") ", {\"saved_bytes\": 6}]") "]}",
     "stages[0].options[1].bwd_time: missing required field"},
    {HEAD ST(", \"options\": [{\"saved_bytes\": 4, \"bwd_time\": 1}]") "]}",
     "stages[0].options[0].saved_bytes: 4 is less than out_bytes 5"},
    {HEAD ST(", \"options\": [" OPT(", \"fall_overhead\": -1") "]") "]}",
     "stages[0].options[0].fall_overhead: negative size"},
    {HEAD ST(", \"options\": [" OPT(", \"bwd_overhead\": 9007199254740992") "]") "]}",
     "stages[0].options[0].bwd_overhead: size 9007199254740992 is 2^53 or more"},
    {HEAD ST(", \"options\": [{\"saved_bytes\": 6, \"bwd_time\": -2}]") "]}",
     "stages[0].options[0].bwd_time: negative time"},
    {HEAD ST(", \"options\": [{\"saved_bytes\": 6, \"bwd_time\": \"x\"}]") "]}",
     "stages[0].options[0].bwd_time: expected a number, got a string"},
    {HEAD ST(", \"options\": [" OPT(", \"name\": \"a name of sixty-four bytes, one more than "
                                  "the limit allows it...\"") "]") "]}",
     "stages[0].options[0].name: 64 bytes long, more than the limit of 63"},
    {HEAD ST(", \"options\": [" OPT("") "," OPT("") "," OPT("") "," OPT("") "," OPT("") ","
             OPT("") "," OPT("") "," OPT("") "," OPT("") "]") "]}",
     "stages[0].options: 9 options, more than the limit of 8"},
    {HEAD ST(", \"fall_overhead\": 1.5") "]}",
     "stages[0].fall_overhead: size 1.5 is not a whole number"},
    {HEAD ST(", \"fall_overhead\": null") "]}",
     "stages[0].fall_overhead: expected a number, got null"},
    {HEAD ST(", \"options\": [{\"saved_bytes\": 6, \"bwd_time\": 1e308}, "
             "{\"saved_bytes\": 6, \"bwd_time\": 1e308}]") "]}",
     "stages: the times (fwd_time + bwd_time) add up to inf"},
};

static void chain_options_bad(void) {
    for (size_t k = 0; k < sizeof bad_options / sizeof bad_options[0]; k++) {
        remat_chain *c = (remat_chain *)1;
        remat_error e;
        remat_status s = chain_text(bad_options[k].text, &c, &e);
        if (s != REMAT_E_INPUT || c != NULL)
            TEST_FAIL_("case %zu: status %d, expected REMAT_E_INPUT", k, (int)s);
        if (strncmp(e.message, "t.json: ", 8) != 0 || !strstr(e.message, bad_options[k].needle))
            TEST_FAIL_("case %zu: \"%s\" lacks \"t.json: ...%s\"", k, e.message,
                       bad_options[k].needle);
    }
    /* The options' sizes count in the 2^62 bound on all sizes together, so
     * that any choice of options keeps the simulator's sums in 64 bits:
     * 25 stages of 8 options of three sizes just below 2^53 pass it. */
    const char *big = "{\"saved_bytes\": 9007199254740991, \"fall_overhead\": 9007199254740991, "
                      "\"bwd_overhead\": 9007199254740991, \"bwd_time\": 1}";
    size_t cap = 64 + 25 * (9 * strlen(big) + 128), len = 0;
    char *t = malloc(cap);
    ASSERT_TRUE(t != NULL);
    len += (size_t)snprintf(t + len, cap - len, HEAD);
    for (int i = 0; i < 25; i++) {
        len += (size_t)snprintf(t + len, cap - len, "%s{\"fwd_time\": 1, \"bwd_time\": 1, "
                                "\"out_bytes\": 1, \"saved_bytes\": 1, \"options\": [",
                                i ? ", " : "");
        for (int k = 0; k < 8; k++)
            len += (size_t)snprintf(t + len, cap - len, "%s%s", k ? ", " : "", big);
        len += (size_t)snprintf(t + len, cap - len, "]}");
    }
    snprintf(t + len, cap - len, "]}");
    remat_chain *c = NULL;
    remat_error e;
    remat_status st = chain_text(t, &c, &e);
    free(t);
    ASSERT_STATUS(st, REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "t.json: stages: the sizes add up to 2^62 bytes or more");
}

static void chain_bad_inputs(void) {
    for (size_t k = 0; k < sizeof bad_chains / sizeof bad_chains[0]; k++) {
        remat_chain *c = (remat_chain *)1;
        remat_error e;
        remat_status s = chain_text(bad_chains[k].text, &c, &e);
        if (s != REMAT_E_INPUT || c != NULL || e.status != REMAT_E_INPUT)
            TEST_FAIL_("case %zu: status %d, expected REMAT_E_INPUT", k, (int)s);
        if (strncmp(e.message, "t.json: ", 8) != 0 || !strstr(e.message, bad_chains[k].needle))
            TEST_FAIL_("case %zu: \"%s\" lacks \"t.json: ...%s\"", k, e.message,
                       bad_chains[k].needle);
        if (strchr(e.message, '\n')) TEST_FAIL_("case %zu: message has a newline", k);
    }
}

/* Builds "{...stages: [S, S, ..., S]}" with n stages. */
static char *many_stages(size_t n) {
    const char *head = HEAD, *one = LOSS ",";
    size_t cap = strlen(head) + n * strlen(one) + 8;
    char *t = malloc(cap);
    if (!t) return NULL;
    char *p = t + sprintf(t, "%s", head);
    for (size_t k = 0; k < n; k++) p += sprintf(p, "%s", one);
    p[-1] = ']';
    sprintf(p, "}");
    return t;
}

static void chain_limits(void) {
    remat_chain *c = NULL;
    remat_error e;
    char *t = many_stages(REMAT_MAX_STAGES + 1);
    ASSERT_TRUE(t != NULL);
    remat_status s = chain_text(t, &c, &e);
    free(t);
    ASSERT_STATUS(s, REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "t.json: stages: 100001 stages, more than the limit of 100000");
    t = many_stages(1000);
    s = chain_text(t, &c, &e);
    free(t);
    ASSERT_STATUS(s, REMAT_OK);
    ASSERT_EQ_U64(c->n, 1000);
    remat_chain_free(c);

    /* nesting deeper than the limit, inside an ignored field */
    size_t depth = REMAT__JSON_MAX_DEPTH + 10;
    char *deep = malloc(2 * depth + 64);
    ASSERT_TRUE(deep != NULL);
    char *p = deep + sprintf(deep, "{\"format\": \"remat-chain-1\", \"x\": ");
    memset(p, '[', depth);
    memset(p + depth, ']', depth);
    sprintf(p + 2 * depth, "}");
    s = chain_text(deep, &c, &e);
    free(deep);
    ASSERT_STATUS(s, REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "nested more than 1000 deep");

    /* names: 255 bytes fit, 256 do not */
    char name[300], doc[600];
    memset(name, 'n', 256);
    name[256] = '\0';
    snprintf(doc, sizeof doc, HEAD "{\"name\": \"%s\", \"fwd_time\": 1, \"bwd_time\": 1, \"out_bytes\": 1, \"saved_bytes\": 1}]}", name);
    ASSERT_STATUS(chain_text(doc, &c, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "t.json: stages[0].name: 256 bytes long, more than the limit of 255");
    name[255] = '\0';
    snprintf(doc, sizeof doc, HEAD "{\"name\": \"%s\", \"fwd_time\": 1, \"bwd_time\": 1, \"out_bytes\": 1, \"saved_bytes\": 1}]}", name);
    ASSERT_STATUS(chain_text(doc, &c, &e), REMAT_OK);
    ASSERT_EQ_U64(strlen(c->stages[0].name), 255);
    remat_chain_free(c);

    /* documents above the size limit are refused before parsing */
    ASSERT_STATUS(remat_chain_from_json("{}", REMAT__JSON_MAX_BYTES + 1, "big.json", &c, &e),
                  REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "big.json: ");
    ASSERT_CONTAINS(e.message, "more than the limit of 128 MiB");
    char path[64];
    temp_path(path, sizeof path);
    int ok = truncate(path, (off_t)REMAT__JSON_MAX_BYTES + 1) == 0; /* sparse: no disk used */
    s = remat_chain_load(path, &c, &e);
    unlink(path);
    ASSERT_TRUE(ok);
    ASSERT_STATUS(s, REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, path);
    ASSERT_CONTAINS(e.message, "more than the limit of 128 MiB");

    ASSERT_STATUS(remat_chain_from_json(NULL, 0, NULL, &c, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "<string>");
    ASSERT_STATUS(remat_chain_from_json(tiny, strlen(tiny), NULL, NULL, &e), REMAT_E_INPUT);
    /* the length is honoured: a prefix of a valid document is malformed */
    ASSERT_STATUS(remat_chain_from_json(tiny, 20, NULL, &c, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "<string>: line 1");
}

/* ------------------------------------------------------------ cJSON and its bounds */

static size_t tree_nodes(const cJSON *v) {
    size_t n = 1;
    for (const cJSON *m = v->child; m; m = m->next) n += tree_nodes(m);
    return n;
}

/* The census counts exactly the nodes cJSON allocates: the bound is on the
 * real tree, not on a guess. */
static void census_counts_cjson_nodes(void) {
    const char *docs[] = {
        tiny,
        "{}",
        "[]",
        "0",
        "{\"a\": [[], {}, [[]], {\"b\": {}}], \"c\": null, \"d\": true, \"e\": false}",
        "{\"s\": \"a, b: [c] {d}\", \"t\": \"q\\\"uote, [x]: \\\\\", \"u\": [\"\\\\\", \":\"]}",
        " [ -1.5e+3 , 2 ,3,\"x\" ] ",
        "{\"k\\u0041\": \"\\u00e9\\ud83d\\ude00\", \"n\": [1,2,{\"m\":[3]}]}",
        "\xEF\xBB\xBF{\"bom\": 1}", /* a byte order mark, which cJSON skips */
    };
    for (size_t k = 0; k < sizeof docs / sizeof docs[0]; k++) {
        size_t values = 0;
        uint64_t bytes = remat__json_tree_bytes(docs[k], strlen(docs[k]), &values);
        cJSON *t = cJSON_ParseWithLength(docs[k], strlen(docs[k]));
        if (!t) TEST_FAIL_("doc %zu: not JSON", k);
        size_t nodes = tree_nodes(t);
        cJSON_Delete(t);
        if (values != nodes) TEST_FAIL_("doc %zu: census %zu values, cJSON %zu nodes", k, values, nodes);
        ASSERT_TRUE(bytes >= values * sizeof(cJSON));
    }
    const char *files[] = {"examples/tiny.json", "examples/resnet1001-like.json",
                           "tests/cli/data/storeall.sched.json", "examples/join/toy.json"};
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char *text = NULL;
        size_t len = 0, values = 0;
        ASSERT_STATUS(remat_read_file(files[k], &text, &len, NULL), REMAT_OK);
        (void)remat__json_tree_bytes(text, len, &values);
        cJSON *t = cJSON_ParseWithLength(text, len);
        ASSERT_TRUE(t != NULL);
        size_t nodes = tree_nodes(t);
        cJSON_Delete(t);
        free(text);
        if (values != nodes) TEST_FAIL_("%s: census %zu, cJSON %zu", files[k], values, nodes);
    }
}

/* "{... "x": [0,0,...,0], stages: [LOSS]}" with n zeros. */
static char *zeros_doc(size_t n, size_t *len) {
    const char *head = "{\"format\": \"remat-chain-1\", \"input_bytes\": 1, \"x\": [";
    const char *tail = "], \"stages\": [" LOSS "]}";
    size_t cap = strlen(head) + 2 * n + strlen(tail) + 1;
    char *t = malloc(cap);
    if (!t) return NULL;
    char *p = t + sprintf(t, "%s", head);
    for (size_t k = 0; k < n; k++) {
        *p++ = '0';
        *p++ = ',';
    }
    p -= n > 0;
    p += sprintf(p, "%s", tail);
    *len = (size_t)(p - t);
    return t;
}

/* A tree larger than max(64 MiB, 16 x the text) is refused before cJSON
 * builds it; below the floor, any document is read. */
static void tree_bound(void) {
    remat_chain *c = NULL;
    remat_error e;
    size_t len;
    /* 700000 zeros: 1.4 MB of text, a 56 MB tree (40 bytes per byte), under the floor */
    char *t = zeros_doc(700000, &len);
    ASSERT_TRUE(t != NULL);
    size_t values = 0;
    uint64_t est = remat__json_tree_bytes(t, len, &values);
    ASSERT_TRUE(est < REMAT__JSON_TREE_FLOOR && est > (uint64_t)len * REMAT__JSON_TREE_FACTOR);
    remat_status s = remat_chain_from_json(t, len, "z.json", &c, &e);
    free(t);
    ASSERT_STATUS(s, REMAT_OK);
    remat_chain_free(c);
    /* 2500000 zeros: 5 MB of text, a 200 MB tree: refused, naming the limit */
    t = zeros_doc(2500000, &len);
    ASSERT_TRUE(t != NULL);
    est = remat__json_tree_bytes(t, len, &values);
    ASSERT_TRUE(est > (uint64_t)len * REMAT__JSON_TREE_FACTOR && est > REMAT__JSON_TREE_FLOOR);
    s = remat_chain_from_json(t, len, "z.json", &c, &e);
    free(t);
    ASSERT_STATUS(s, REMAT_E_INPUT);
    ASSERT_TRUE(c == NULL);
    ASSERT_CONTAINS(e.message, "z.json: 2500010 values in 5000");
    ASSERT_CONTAINS(e.message, "would take about 190 MiB to read, more than the limit of 76 MiB "
                               "(16 times the document's size, at least 64 MiB)");
    ASSERT_TRUE(strchr(e.message, '\n') == NULL);
    /* the same bound for schedules and join documents */
    remat_schedule *sc = NULL;
    const char *sched = "{\"format\": \"remat-schedule-1\", \"x\": [";
    t = malloc(strlen(sched) + 2 * 2500000 + 16);
    ASSERT_TRUE(t != NULL);
    char *p = t + sprintf(t, "%s", sched);
    for (size_t k = 0; k < 2500000; k++) p += sprintf(p, "0,");
    sprintf(p - 1, "], \"ops\": []}");
    s = remat_schedule_from_json(t, strlen(t), "s.json", &sc, &e);
    remat_join_problem jp;
    remat_status s2 = remat_join_problem_from_json(t, strlen(t), "j.json", &jp, &e);
    free(t);
    ASSERT_STATUS(s, REMAT_E_INPUT);
    ASSERT_STATUS(s2, REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "j.json: 2500004 values in");
}

/* cJSON would cut a string at a NUL: any string or key holding one, raw or
 * written \u0000, is refused, named by its path. */
static void nul_anywhere(void) {
    static const bad_case cases[] = {
        {HEAD "{\"name\": \"a\\u0000b\", \"fwd_time\": 1, \"bwd_time\": 1, \"out_bytes\": 1, \"saved_bytes\": 1}]}",
         "t.json: stages[0].name: contains a NUL character (\\u0000)"},
        {"{\"format\": \"remat-chain-1\", \"name\": \"\\u0000\", \"input_bytes\": 1, \"stages\": [" LOSS "]}",
         "t.json: name: contains a NUL character"},
        {"{\"format\": \"remat-chain-1\\u0000x\", \"input_bytes\": 1, \"stages\": [" LOSS "]}",
         "t.json: format: contains a NUL character"},
        {"{\"format\": \"remat-chain-1\", \"x\": {\"y\": [1, \"\\u0000\"]}, \"input_bytes\": 1, \"stages\": [" LOSS "]}",
         "t.json: x.y[1]: contains a NUL character"},
        {"{\"format\": \"remat-chain-1\", \"k\\u0000\": 1, \"input_bytes\": 1, \"stages\": [" LOSS "]}",
         "t.json: line 1, column 29: a key contains a NUL character (\\u0000)"},
        {HEAD ST("") ", {\"fwd_time\": 1, \"bwd_time\": 1, \"out_bytes\": 1, \"saved_bytes\": 1, \"\\u0000\": 0}]}",
         "a key in stages[1] contains a NUL character"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        remat_chain *c = (remat_chain *)1;
        remat_error e;
        ASSERT_STATUS(chain_text(cases[k].text, &c, &e), REMAT_E_INPUT);
        ASSERT_TRUE(c == NULL);
        if (!strstr(e.message, cases[k].needle))
            TEST_FAIL_("case %zu: \"%s\" lacks \"%s\"", k, e.message, cases[k].needle);
    }
    /* a raw NUL byte inside a string, which cJSON copies as it is */
    const char raw[] = "{\"format\": \"remat-chain-1\", \"name\": \"a\0b\", \"input_bytes\": 1, "
                       "\"stages\": [" LOSS "]}";
    remat_chain *c = NULL;
    remat_error e;
    ASSERT_STATUS(remat_chain_from_json(raw, sizeof raw - 1, "t.json", &c, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "t.json: name: contains a NUL character");
    /* an escaped backslash before u0000 is not a NUL */
    const char *ok = "{\"format\": \"remat-chain-1\", \"name\": \"a\\\\u0000\", \"input_bytes\": 1, "
                     "\"stages\": [" LOSS "]}";
    ASSERT_STATUS(chain_text(ok, &c, &e), REMAT_OK);
    ASSERT_TRUE(strcmp(c->name, "a\\u0000") == 0);
    remat_chain_free(c);
    /* schedules: an op string */
    remat_schedule *s = NULL;
    const char *sched = "{\"format\": \"remat-schedule-1\", \"ops\": [\"Fn 1\", \"Fall 1\\u0000junk\"]}";
    ASSERT_STATUS(remat_schedule_from_json(sched, strlen(sched), "s.json", &s, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "s.json: ops[1]: contains a NUL character");
}

/* cJSON's nesting limit, 1000 arrays and objects, the top-level object
 * included; past it the message says so. */
static void nesting_limit(void) {
    for (size_t inner = REMAT__JSON_MAX_DEPTH - 1; inner <= REMAT__JSON_MAX_DEPTH; inner++) {
        char *deep = malloc(2 * inner + 256);
        ASSERT_TRUE(deep != NULL);
        char *p = deep + sprintf(deep, "{\"format\": \"remat-chain-1\", \"x\": ");
        memset(p, '[', inner);
        memset(p + inner, ']', inner);
        sprintf(p + 2 * inner, ", \"input_bytes\": 1, \"stages\": [" LOSS "]}");
        remat_chain *c = NULL;
        remat_error e;
        remat_status s = chain_text(deep, &c, &e);
        free(deep);
        if (inner < REMAT__JSON_MAX_DEPTH) {
            ASSERT_STATUS(s, REMAT_OK);
            remat_chain_free(c);
        } else {
            ASSERT_STATUS(s, REMAT_E_INPUT);
            ASSERT_CONTAINS(e.message, "t.json: line 1, column 1033: arrays and objects nested "
                                       "more than 1000 deep");
        }
    }
}

/* ------------------------------------------------------------ schedules */

static remat_status sched_text(const char *text, remat_schedule **s, remat_error *e) {
    return remat_schedule_from_json(text, strlen(text), "s.json", s, e);
}

static void schedule_round_trip(void) {
    const char *ops[] = {"Fck 1",     "Fn 2",      "Fall 3",       "B 3",      "Del a[0]",
                         "Del abar[2]", "Off abar[1]", "Pre abar[1]", "Wait abar[1]", "Off a[2]",
                         "Fall 2",    "B 2",       "Fall 1",       "B 1",      "Wait a[99999]"};
    size_t n = sizeof ops / sizeof ops[0];
    remat_schedule *s = NULL, *t = NULL;
    ASSERT_STATUS(remat_schedule_create("optimal", &s, NULL), REMAT_OK);
    for (size_t k = 0; k < n; k++) {
        remat_op op;
        ASSERT_STATUS(remat_op_parse(ops[k], &op, NULL), REMAT_OK);
        ASSERT_STATUS(remat_schedule_push(s, op, NULL), REMAT_OK);
    }
    s->memory_limit = 100000000;
    s->time = 123.4;
    s->peak_bytes = 98765432;
    char *t1 = NULL, *t2 = NULL;
    ASSERT_STATUS(remat_schedule_to_json(s, &t1, NULL), REMAT_OK);
    ASSERT_CONTAINS(t1, "\"format\": \"remat-schedule-1\"");
    ASSERT_CONTAINS(t1, "\"algorithm\": \"optimal\"");
    ASSERT_CONTAINS(t1, "\"time\": 123.4,");
    ASSERT_CONTAINS(t1, "\"Del abar[2]\"");
    ASSERT_STATUS(remat_schedule_from_json(t1, strlen(t1), "t1", &t, NULL), REMAT_OK);
    ASSERT_TRUE(strcmp(t->algorithm, "optimal") == 0);
    ASSERT_EQ_U64(t->memory_limit, 100000000);
    ASSERT_NEAR(t->time, 123.4, 0);
    ASSERT_EQ_U64(t->peak_bytes, 98765432);
    ASSERT_EQ_U64(t->n_ops, n);
    for (size_t k = 0; k < n; k++) {
        char back[REMAT_OP_TEXT_MAX];
        remat_op_format(t->ops[k], back);
        if (strcmp(back, ops[k]) != 0) TEST_FAIL_("op %zu: %s != %s", k, back, ops[k]);
    }
    ASSERT_STATUS(remat_schedule_to_json(t, &t2, NULL), REMAT_OK);
    ASSERT_TRUE(strcmp(t1, t2) == 0);
    remat_free(t1);
    remat_free(t2);
    remat_schedule_free(t);

    /* file round trip */
    char path[64];
    temp_path(path, sizeof path);
    ASSERT_STATUS(remat_schedule_save(s, path, NULL), REMAT_OK);
    remat_status st = remat_schedule_load(path, &t, NULL);
    unlink(path);
    ASSERT_STATUS(st, REMAT_OK);
    ASSERT_EQ_U64(t->n_ops, n);
    remat_schedule_free(t);

    /* a time that is not finite cannot be written */
    s->time = NAN;
    remat_error e;
    ASSERT_STATUS(remat_schedule_to_json(s, &t1, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "time");
    remat_schedule_free(s);
}

static void schedule_defaults_and_empty(void) {
    remat_schedule *s = NULL;
    remat_error e;
    ASSERT_STATUS(sched_text("{\"format\": \"remat-schedule-1\", \"ops\": [], \"note\": 1}", &s, &e),
                  REMAT_OK);
    ASSERT_EQ_U64(s->n_ops, 0);
    ASSERT_EQ_U64(s->memory_limit, 0);
    ASSERT_EQ_U64(s->peak_bytes, 0);
    ASSERT_NEAR(s->time, 0, 0);
    ASSERT_TRUE(s->algorithm[0] == '\0');
    char *t = NULL;
    ASSERT_STATUS(remat_schedule_to_json(s, &t, NULL), REMAT_OK);
    remat_schedule_free(s);
    s = NULL;
    ASSERT_STATUS(remat_schedule_from_json(t, strlen(t), "again", &s, &e), REMAT_OK);
    ASSERT_CONTAINS(t, "\"ops\": []");
    remat_free(t);
    ASSERT_EQ_U64(s->n_ops, 0);
    remat_schedule_free(s);
}

#define SH "{\"format\": \"remat-schedule-1\", "
static const bad_case bad_schedules[] = {
    {SH "\"ops\": [\"Fn 1\", \"Fck 2\", \"Fall 3\", \"B 3\", \"B 2\", \"Fx 3\"]}", "ops[5]: op \"Fx 3\": unknown op kind"},
    {SH "\"ops\": [\"Fn x\"]}", "ops[0]: op \"Fn x\": expected a stage number"},
    {SH "\"ops\": [\"Fn -1\"]}", "ops[0]: op \"Fn -1\": expected a stage number"},
    {SH "\"ops\": [\"Fn 1\", \"Del b[2]\"]}", "ops[1]: op \"Del b[2]\": expected a[i] or abar[i]"},
    {SH "\"ops\": [\"Fn1\"]}", "ops[0]: op \"Fn1\""},
    {SH "\"ops\": [\"Fall 3/\"]}", "ops[0]: op \"Fall 3/\": expected an option number 0..255"},
    {SH "\"ops\": [\"Fall 3/x\"]}", "ops[0]: op \"Fall 3/x\": expected an option number"},
    {SH "\"ops\": [\"Fall 3/256\"]}", "ops[0]: op \"Fall 3/256\": expected an option number"},
    {SH "\"ops\": [\"Fall 3/1 \"]}", "ops[0]: op \"Fall 3/1 \": expected an option number"},
    {SH "\"ops\": [\"Fall 3/-1\"]}", "ops[0]: op \"Fall 3/-1\": expected an option number"},
    {SH "\"ops\": [\"B 3/1\"]}", "ops[0]: op \"B 3/1\": only Fall takes an option"},
    {SH "\"ops\": [\"Fck 2/1\"]}", "ops[0]: op \"Fck 2/1\": only Fall takes an option"},
    {SH "\"ops\": [\"Del abar[2]/1\"]}", "ops[0]: op \"Del abar[2]/1\": expected a[i] or abar[i]"},
    {SH "\"ops\": [\"Fn 1\", 2]}", "ops[1]: expected a string, got a number"},
    {SH "\"ops\": \"Fn 1\"}", "ops: expected an array, got a string"},
    {SH "\"time\": 1}", "ops: missing required field"},
    {SH "\"memory_limit\": -5, \"ops\": []}", "memory_limit: negative size"},
    {SH "\"memory_limit\": 1e300, \"ops\": []}", "memory_limit: size 1.0000000000000001e+300 is 2^53 or more"},
    {SH "\"peak_bytes\": 1.5, \"ops\": []}", "peak_bytes: size 1.5 is not a whole number"},
    {SH "\"time\": \"fast\", \"ops\": []}", "time: expected a number, got a string"},
    {SH "\"time\": -1, \"ops\": []}", "time: negative time"},
    {SH "\"time\": 1e999, \"ops\": []}", "time: not a finite number"},
    {SH "\"algorithm\": \"an algorithm name longer than 31\", \"ops\": []}", "algorithm: 32 bytes long, more than the limit of 31"},
    {SH "\"algorithm\": false, \"ops\": []}", "algorithm: expected a string, got a boolean"},
    {"{\"format\": \"remat-chain-1\", \"ops\": []}", "format: \"remat-chain-1\" is not \"remat-schedule-1\""},
    {"{\"ops\": []}", "format: missing required field"},
    {SH "\"ops\": [}", "line 1, column 40: malformed JSON"},
    {"null", "expected a JSON object at the top level, got null"},
};

static void schedule_bad_inputs(void) {
    for (size_t k = 0; k < sizeof bad_schedules / sizeof bad_schedules[0]; k++) {
        remat_schedule *s = (remat_schedule *)1;
        remat_error e;
        remat_status st = sched_text(bad_schedules[k].text, &s, &e);
        if (st != REMAT_E_INPUT || s != NULL)
            TEST_FAIL_("case %zu: status %d, expected REMAT_E_INPUT", k, (int)st);
        if (strncmp(e.message, "s.json: ", 8) != 0 || !strstr(e.message, bad_schedules[k].needle))
            TEST_FAIL_("case %zu: \"%s\" lacks \"s.json: ...%s\"", k, e.message,
                       bad_schedules[k].needle);
    }
    remat_schedule *s = NULL;
    remat_error e;
    ASSERT_STATUS(remat_schedule_load("/nonexistent/s.json", &s, &e), REMAT_E_IO);
    ASSERT_CONTAINS(e.message, "/nonexistent/s.json");
}

/* "Fall i/k" reads and writes; "Fall i/0" is "Fall i"; the simulator, not
 * the reader, judges whether the chain has option k. */
static void schedule_options(void) {
    remat_schedule *s = NULL;
    remat_error e;
    const char *doc = SH "\"ops\": [\"Fall 1/2\", \"Fall 2/0\", \"B 2\", \"B 1\"]}";
    ASSERT_STATUS(sched_text(doc, &s, &e), REMAT_OK);
    ASSERT_EQ_INT(s->ops[0].option, 2);
    ASSERT_EQ_INT(s->ops[1].option, 0);
    char *t = NULL;
    ASSERT_STATUS(remat_schedule_to_json(s, &t, &e), REMAT_OK);
    ASSERT_CONTAINS(t, "\"Fall 1/2\", \"Fall 2\", \"B 2\", \"B 1\"");
    remat_free(t);
    remat_chain *c = NULL;
    ASSERT_STATUS(chain_text(HEAD ST(", \"options\": [" OPT("") "]") ", " LOSS "]}", &c, &e),
                  REMAT_OK);
    remat_sim_result *r = NULL;
    ASSERT_STATUS(remat_simulate(c, s, NULL, &r, &e), REMAT_OK);
    ASSERT_EQ_INT(r->valid, 0);
    ASSERT_EQ_U64(r->failed_op, 0);
    ASSERT_TRUE(strcmp(r->failed_op_text, "Fall 1/2") == 0);
    ASSERT_CONTAINS(r->reason, "stage 1 has 1 option: there is no option 2");
    remat_sim_result_free(r);
    s->ops[0].option = 1;
    ASSERT_STATUS(remat_simulate(c, s, NULL, &r, &e), REMAT_OK);
    ASSERT_EQ_INT(r->valid, 1);
    ASSERT_NEAR(r->time, 1 + 1 + 1 + 3, 0); /* B 1 takes the option's bwd_time */
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

/* A schedule read from JSON simulates like the one that was written. */
static void schedule_json_then_simulate(void) {
    remat_chain *c = NULL;
    ASSERT_STATUS(remat_chain_load("examples/tiny.json", &c, NULL), REMAT_OK);
    const char *doc = SH "\"algorithm\": \"hand\", \"time\": 15, \"ops\": ["
                         "\"Fck 1\", \"Fn 2\", \"Fall 3\", \"Fall 4\", \"B 4\", \"B 3\","
                         "\"Fck 1\", \"Fall 2\", \"B 2\", \"Fall 1\", \"B 1\"]}";
    remat_schedule *s = NULL;
    ASSERT_STATUS(sched_text(doc, &s, NULL), REMAT_OK);
    /* tiny: fwd 1+2+1+1, bwd 1+3, then 1+2 forwards, bwd 4, 1, 2 = 19 */
    s->time = 19;
    ASSERT_TRUE(test_schedule_ok(c, s, UINT64_MAX));
    remat_schedule_free(s);
    remat_chain_free(c);
}

/* ------------------------------------------------------------ sizes */

static void parse_size_good(void) {
    struct { const char *text; uint64_t want; } good[] = {
        {"0", 0}, {"123", 123}, {"1K", 1024}, {"1KiB", 1024}, {"1KB", 1000}, {"1k", 1024},
        {"4GiB", (uint64_t)4 << 30}, {"1.5G", 1610612736}, {"300MB", 300000000},
        {"2 MiB", 2097152}, {"1.5KB", 1500}, {"0.5K", 512}, {"0.3K", 307}, {"1.0001K", 1024},
        {"10B", 10}, {"10 b", 10}, {"1gb", 1000000000}, {"1T", (uint64_t)1 << 40},
        {"2TB", 2000000000000ull}, {"9007199254740991", REMAT_MAX_BYTES - 1},
        {"8191.999999999999999999T", REMAT_MAX_BYTES - 1}, {"0.000000000000000001T", 0},
        {"0.1M", 104857}, {"007", 7}, {"1.25 GiB", 1342177280},
    };
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        uint64_t v = 12345;
        remat_error e;
        if (remat_parse_size(good[k].text, &v, &e) != REMAT_OK)
            TEST_FAIL_("\"%s\": %s", good[k].text, e.message);
        if (v != good[k].want)
            TEST_FAIL_("\"%s\": %llu, expected %llu", good[k].text, (unsigned long long)v,
                       (unsigned long long)good[k].want);
    }
}

static void parse_size_bad(void) {
    struct { const char *text; const char *needle; } bad[] = {
        {"", "expected a number"}, {"-1", "expected a number"}, {"+1", "expected a number"},
        {"abc", "expected a number"}, {" 1", "expected a number"}, {".5K", "expected a number"},
        {"1.5", "not a whole number of bytes"}, {"1.5B", "not a whole number of bytes"},
        {"1.", "expected digits after the decimal point"}, {"1.K", "expected digits"},
        {"1X", "unknown suffix \"X\""}, {"1 ", "unknown suffix"}, {"1  K", "unknown suffix"},
        {"1KiBs", "unknown suffix"}, {"1e6", "unknown suffix"}, {"1,000", "unknown suffix"},
        {"9007199254740992", "2^53 bytes or more"}, {"8192T", "2^53 bytes or more"},
        {"99999999999999999999999", "2^53 bytes or more"},
        {"8191.9999999999999999999T", "more than 18 decimal digits"},
        {"8796093022208K", "2^53 bytes or more"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        uint64_t v = 77;
        remat_error e;
        if (remat_parse_size(bad[k].text, &v, &e) != REMAT_E_INPUT)
            TEST_FAIL_("\"%s\": accepted as %llu", bad[k].text, (unsigned long long)v);
        ASSERT_EQ_U64(v, 77);
        if (!strstr(e.message, bad[k].needle))
            TEST_FAIL_("\"%s\": \"%s\" lacks \"%s\"", bad[k].text, e.message, bad[k].needle);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", bad[k].text);
        ASSERT_CONTAINS(e.message, quoted);
    }
    ASSERT_STATUS(remat_parse_size(NULL, NULL, NULL), REMAT_E_INPUT);
}

static const test_case cases[] = {
    {"chain_fields_and_defaults", chain_fields_and_defaults},
    {"chain_round_trip", chain_round_trip},
    {"chain_random_round_trips", chain_random_round_trips},
    {"examples_round_trip_byte_for_byte", examples_round_trip_byte_for_byte},
    {"chain_save_and_load", chain_save_and_load},
    {"chain_bad_inputs", chain_bad_inputs},
    {"chain_options", chain_options},
    {"chain_stops", chain_stops},
    {"chain_options_random_round_trips", chain_options_random_round_trips},
    {"chain_options_bad", chain_options_bad},
    {"chain_limits", chain_limits},
    {"census_counts_cjson_nodes", census_counts_cjson_nodes},
    {"tree_bound", tree_bound},
    {"nul_anywhere", nul_anywhere},
    {"nesting_limit", nesting_limit},
    {"schedule_round_trip", schedule_round_trip},
    {"schedule_defaults_and_empty", schedule_defaults_and_empty},
    {"schedule_bad_inputs", schedule_bad_inputs},
    {"schedule_options", schedule_options},
    {"schedule_json_then_simulate", schedule_json_then_simulate},
    {"parse_size_good", parse_size_good},
    {"parse_size_bad", parse_size_bad},
};
TEST_MAIN(cases)
