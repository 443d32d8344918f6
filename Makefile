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
# -fvisibility=hidden: libremat.so exports only what the headers mark REMAT_API
# (the tests link the static library and may call remat__ internals).
CFLAGS_ALL = -std=c11 -Wall -Wextra -Werror -Iinclude -D_POSIX_C_SOURCE=200809L -pthread \
             -fPIC -fvisibility=hidden -MMD -MP $(OPT) $(SAN) $(CFLAGS)
LDLIBS_ALL = -lcjson -lm -pthread $(SAN) $(LDFLAGS)

# The version has one source, include/remat/status.h; remat.pc, the soname and
# the Python package (pyproject.toml) read it from there.
VERSION_PART = $(shell sed -n 's/^\#define REMAT_VERSION_$(1) \([0-9]*\)$$/\1/p' include/remat/status.h)
VERSION   := $(call VERSION_PART,MAJOR).$(call VERSION_PART,MINOR).$(call VERSION_PART,PATCH)
SONAME    := libremat.so.$(call VERSION_PART,MAJOR)

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

.PHONY: all test test-plain-kernels asan tsan lint fuzz-smoke check bench figures install deps demo clean wheel \
        test-installed peers
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
	$(CC) -shared -Wl,-soname,$(SONAME) -o $@ $^ $(LDLIBS_ALL)

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

# The PyTorch tests marked `kernels` (convolutions, compiled code) again, on
# other CPU kernels than this CPU's (oneDNN off, ATen's default CPU
# capability; tests/python/conftest.py): profiles, and the limits the tests
# derive from them, change with the kernels, so a test that holds on one
# CPU's kernels only fails here first.
test-plain-kernels: all
	BUILD=$(BUILD) PYTHON=$(PYTHON) REMAT_TEST_KERNELS=plain sh tests/run_tests.sh

asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all" test

# The wheel `pip install .` would install (scikit-build-core, CMakeLists.txt),
# built offline with the backend in .venv and warnings as errors.
wheel:
	rm -rf $(BUILD)/wheel
	$(PYTHON) -m pip wheel . --no-build-isolation --no-deps --no-index -q -w $(BUILD)/wheel \
	    --config-settings=cmake.define.REMAT_WERROR=ON

# The binding, entry-point and plot tests against that wheel installed in a
# throwaway venv: no PYTHONPATH, no REMAT_LIB, the `remat` of the venv. The
# test tools (pytest, matplotlib) come from .venv through a .pth file that
# puts its site-packages after the venv's own, so `import remat` finds the wheel.
INSTALLED_VENV = $(BUILD)/venv-installed
INSTALLED_TESTS = tests/python/test_binding.py tests/python/test_packaging.py \
                  tests/python/test_plot.py
test-installed: wheel
	rm -rf $(INSTALLED_VENV)
	$(PYTHON) -m venv --without-pip $(INSTALLED_VENV)
	$(PYTHON) -m pip --python $(INSTALLED_VENV)/bin/python install -q --no-index --no-deps \
	    $(BUILD)/wheel/remat-*-py3-none-*.whl
	$(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > \
	    "$$($(INSTALLED_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/dev-tools.pth"
	env -u PYTHONPATH -u REMAT_LIB -u REMAT_CLI PATH="$(abspath $(INSTALLED_VENV))/bin:$$PATH" \
	    REMAT_EXPECT_INSTALLED=1 $(INSTALLED_VENV)/bin/python -m pytest -q -p no:cacheprovider \
	    $(INSTALLED_TESTS)

# ThreadSanitizer on the tests of the threaded solvers (optimal, revolve,
# pofo, the join solver). Cases that take minutes under TSan (long
# single-table sweeps and the join brute force, single-threaded, covered by
# `make test`) are left out.
TSAN_TESTS := test_optimal test_revolve test_offload test_hjoin
TSAN_SKIP  := -curve_from_min -random_schedules_valid -brute_force_two_branches \
              -brute_force_three_branches -any_order_at_most_nested -one_branch_equals_optimal \
              -brute_force_stops
tsan:
	$(MAKE) BUILD=build-tsan OPT="-O1 -g" SAN="-fsanitize=thread" \
	    $(TSAN_TESTS:%=build-tsan/tests/%)
	@for t in $(TSAN_TESTS); do echo "== tsan $$t"; \
	    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" build-tsan/tests/$$t $(TSAN_SKIP) \
	    || exit 1; done

# Static checks: ruff and mypy --strict on the Python package (pyproject.toml),
# no import circle in it (scripts/check_imports.py), cppcheck on the library,
# the CLI and the fuzz targets. No finding is
# allowed; a suppression, if one is ever needed, says why it is a false positive.
CPPCHECK_SUPPRESS :=
lint:
	$(PYTHON) -m ruff check
	$(PYTHON) -m mypy
	$(PYTHON) scripts/check_imports.py
	cppcheck -q --std=c11 --enable=warning,performance,portability --inline-suppr \
	    --error-exitcode=1 $(CPPCHECK_SUPPRESS) -Iinclude -Isrc -j2 src tools fuzz

# Each fuzz target for 30 seconds (`make fuzz` runs longer).
fuzz-smoke:
	$(MAKE) fuzz FUZZ_SECONDS=30

# Everything CI runs (the README's test command is `make deps && make check`):
# the suite, the PyTorch tests on other CPU kernels, the static checks, the
# installed wheel's tests, the suite under ASan + UBSan, TSan on the threaded
# solvers and a fuzz smoke run; then the closing count of the three runs.
check: test test-plain-kernels lint test-installed asan tsan fuzz-smoke
	@cat $(BUILD)/test-summary.txt $(BUILD)/test-summary-plain.txt build-asan/test-summary.txt | \
	    awk '{p += $$1; f += $$3} END {printf "check: %d passed, %d failed\n", p, f; exit f > 0}'

# ROTOR=DIR adds the comparison with rotor's own DP (built outside, BENCHMARKS.md).
bench: all $(BENCH_BIN)
	ROTOR="$(ROTOR)" PYTHON="$(PYTHON)" sh bench/run_bench.sh $(BUILD)
	@echo; echo "## json_memory (peak RSS of reading documents)"; echo
	$(PYTHON) bench/json_memory.py --remat $(BUILD)/remat

# remat.torch on GPT-2 and ResNet-50 (CPU): predicted and measured peaks, step times.
bench-torch: all
	REMAT_LIB=$(CURDIR)/$(BUILD)/libremat.so $(PYTHON) bench/torch_bench.py

# PyTorch's own checkpointing methods against remat.torch on GPT-2, Llama,
# Mixtral (a mixture of experts, issue 24) and ResNet-50 (issue 9): CSVs and PNGs into docs/img, the tables of BENCHMARKS.md
# on stdout. About an hour per model on the 2 shared cores; not part of check.
# PEERS_ARGS: e.g. --models gpt2, --quick (a logic check), --device cuda.
PEERS_ARGS ?=
peers: all
	PYTHONPATH=$(CURDIR)/python REMAT_LIB=$(CURDIR)/$(BUILD)/libremat.so \
	    $(PYTHON) bench/torch_peers.py $(PEERS_ARGS)

# Regenerates the join (section 6) and offload (section 5) figures in docs/img,
# and the pictures of `remat plot` the docs show (run from the build tree).
REMAT_PY = env PYTHONPATH=$(CURDIR)/python REMAT_LIB=$(CURDIR)/$(BUILD)/libremat.so \
           REMAT_CLI=$(CURDIR)/$(BUILD)/remat $(PYTHON) -m remat
R101 = examples/resnet101-b16-500.json
figures: all
	$(PYTHON) bench/join_figures.py --remat $(BUILD)/remat --out docs/img
	$(PYTHON) bench/pofo_experiments.py --remat $(BUILD)/remat --img docs/img
	$(REMAT_PY) plot curve $(R101) -a optimal -a revolve -a sequential -o docs/img/curve_resnet101.png
	$(REMAT_PY) solve $(R101) --memory 3GiB -a pofo --bandwidth 12GB/s -o $(BUILD)/fig-pofo.json
	$(REMAT_PY) plot timeline $(R101) $(BUILD)/fig-pofo.json --bandwidth 12GB/s \
	    -o docs/img/timeline_resnet101_pofo.png
	$(REMAT_PY) solve $(R101) --memory 3GiB -o $(BUILD)/fig-optimal.json
	$(REMAT_PY) plot timeline $(R101) $(BUILD)/fig-optimal.json -o docs/img/timeline_resnet101_optimal.png
	$(REMAT_PY) plot join examples/join/toy.json --compare -o docs/img/join_toy.png
	$(REMAT_PY) plot join examples/join/clip-like.json --compare -o docs/img/join_clip_like.png

# The main job as a user gets it: pip installs the package (library inside,
# the `remat` command on the venv's PATH), then info and the curve of ResNet-101.
demo:
	$(PYTHON) -m pip install -q --no-build-isolation --no-deps .
	$(dir $(PYTHON))remat info examples/resnet101-b16-500.json
	$(dir $(PYTHON))remat curve examples/resnet101-b16-500.json --points 12
	env -u PYTHONPATH -u REMAT_LIB -u REMAT_CLI $(PYTHON) examples/demo_train.py

deps:
	sh scripts/deps.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/remat \
	    $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 $(BUILD)/libremat.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libremat.so $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libremat.so
	install -m 644 include/remat/*.h $(DESTDIR)$(PREFIX)/include/remat/
	install -m 755 $(BUILD)/remat $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' remat.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/remat.pc

clean:
	rm -rf build build-asan build-tsan

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
