# remat build. `make` builds build/libremat.{a,so} and build/remat.
# `make test` runs the whole suite, `make asan` runs it under ASan + UBSan,
# `make bench` prints the benchmark tables. `make deps` installs Debian packages.
CC      ?= cc
BUILD   ?= build
OPT     ?= -O2 -g
SAN     ?=
PREFIX  ?= /usr/local
# The interpreter of the tests, benchmarks and figures: the venv `make deps` makes.
PYTHON  ?= $(CURDIR)/.venv/bin/python
CFLAGS_ALL = -std=c11 -Wall -Wextra -Werror -Iinclude -D_POSIX_C_SOURCE=200809L -pthread \
             -fPIC -MMD -MP $(OPT) $(SAN) $(CFLAGS)
LDLIBS_ALL = -lcjson -lm -pthread $(SAN) $(LDFLAGS)

LIB_SRC   := $(sort $(wildcard src/core/*.c src/solvers/*.c src/exec/*.c))
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_SRC   := $(sort $(wildcard tools/remat/*.c))
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC  := $(sort $(wildcard tests/test_*.c))
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_COMMON_SRC := $(sort $(wildcard tests/common/*.c))
TEST_COMMON_OBJ := $(TEST_COMMON_SRC:%.c=$(BUILD)/obj/%.o)
BENCH_SRC := $(sort $(wildcard bench/bench_*.c))
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all test asan check bench figures install deps demo clean
all: $(BUILD)/libremat.a $(BUILD)/libremat.so $(BUILD)/remat

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

# The shared test helpers include tests/test.h.
.SECONDARY: $(TEST_COMMON_OBJ)
$(BUILD)/obj/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Isrc -Itests -c $< -o $@

$(BUILD)/libremat.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libremat.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libremat.so.0 -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/remat: $(CLI_OBJ) $(BUILD)/libremat.a
	$(CC) -o $@ $(CLI_OBJ) $(BUILD)/libremat.a $(LDLIBS_ALL)

$(BUILD)/tests/%: tests/%.c $(TEST_COMMON_OBJ) $(BUILD)/libremat.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Isrc -Itests -o $@ $< $(TEST_COMMON_OBJ) $(BUILD)/libremat.a $(LDLIBS_ALL)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libremat.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Isrc -o $@ $< $(BUILD)/libremat.a $(LDLIBS_ALL)

# The whole suite: C tests, CLI tests, then the Python tests (skipped under ASan).
test: all $(TEST_BIN)
	BUILD=$(BUILD) PYTHON=$(PYTHON) PYTHON_TESTS=$(if $(SAN),0,1) sh tests/run_tests.sh

asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all" test

# Everything CI runs (the README's test command is `make deps && make check`).
check: test asan

# ROTOR=DIR adds the comparison with rotor's own DP (built outside, BENCHMARKS.md).
bench: all $(BENCH_BIN)
	ROTOR="$(ROTOR)" PYTHON="$(PYTHON)" sh bench/run_bench.sh $(BUILD)

# Regenerates the join (section 6) and offload (section 5) figures in docs/img.
figures: all
	$(PYTHON) bench/join_figures.py --remat $(BUILD)/remat --out docs/img
	$(PYTHON) bench/pofo_experiments.py --remat $(BUILD)/remat --img docs/img

demo: all
	./$(BUILD)/remat info examples/resnet101-b16-500.json
	./$(BUILD)/remat curve examples/resnet101-b16-500.json --points 12

deps:
	sh scripts/deps.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/remat \
	    $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 $(BUILD)/libremat.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libremat.so $(DESTDIR)$(PREFIX)/lib/libremat.so.0
	ln -sf libremat.so.0 $(DESTDIR)$(PREFIX)/lib/libremat.so
	install -m 644 include/remat/*.h $(DESTDIR)$(PREFIX)/include/remat/
	install -m 755 $(BUILD)/remat $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|0.1.0|' remat.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/remat.pc

clean:
	rm -rf build build-asan

# libFuzzer targets (fuzz/fuzz_*.c), built with clang + ASan/UBSan into
# $(BUILD)/fuzz/ and each run for FUZZ_SECONDS. Not part of `make test`.
FUZZ_SECONDS ?= 60
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_SRC := $(sort $(wildcard fuzz/fuzz_*.c))
.PHONY: fuzz fuzz-bins
fuzz:
	$(MAKE) CC=clang BUILD=$(BUILD)/fuzz OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" fuzz-bins
	sh fuzz/run_fuzz.sh $(BUILD)/fuzz $(FUZZ_SECONDS)

fuzz-bins: $(FUZZ_SRC:fuzz/%.c=$(BUILD)/%)

$(BUILD)/fuzz_%: fuzz/fuzz_%.c $(BUILD)/libremat.a
	$(CC) $(CFLAGS_ALL) -fsanitize=fuzzer -o $@ $< $(BUILD)/libremat.a $(LDLIBS_ALL)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
