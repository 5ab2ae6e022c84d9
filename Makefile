# Thin wrapper; CMake does the building. See README.md.
BUILD     ?= build
JOBS      ?= $(shell nproc)
# ctest's parallelism, apart from the build's (docs/development.md measures both).
CTEST_JOBS ?= $(JOBS)
CMAKE_GEN ?= -G Ninja
# Extra cmake arguments for every build dir (.ci/run: -DSANDPOOL_LINE_TABLES_ONLY=ON).
CMAKE_ARGS ?=

.PHONY: all deps build test check check-asan check-tsan fuzz asan-build tsan-build fuzz-build \
        bench model demo demo-run run install package clean

all: build

deps:
	@scripts/deps.sh

$(BUILD)/build.ninja: | deps
	@cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) >/dev/null

build: deps $(BUILD)/build.ninja
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(CTEST_JOBS)

# Sanitizer builds reuse the normal build's worker host and plugins (see CMakeLists.txt).
check: check-asan check-tsan fuzz

# NO_BUILD=1: the sanitizer and fuzz targets do not bring $(BUILD) up to date first. .ci/run
# builds it once, then runs these builds beside `make test`, whose ninja must be the only one
# in $(BUILD).
BUILD_DEP := $(if $(NO_BUILD),,build)

# Each check is its build (asan-build, tsan-build: .ci/run times them apart) then its run;
# the fuzz targets are built by asan-build.
check-asan: asan-build
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir build-asan --output-on-failure -j $(CTEST_JOBS)

# The sanitizer trees (ASan, TSan) are compiled by clang 14 (installed for the fuzzers), the
# normal tree by GCC 12, so both compilers' -Werror pass on every change: at -O0 with ASan and
# UBSan clang compiles the tests 2.4x faster (a unity batch of manager_tests: 19 s of CPU
# against 46 s) and its tests take a third less CPU; its TSan tree builds in about a third of
# GCC's CPU (docs/development.md). The default linker: gold links clang's sanitizer runtimes
# with a warning per symbol. Under clang's TSan the tests' allocation probes listen to the
# sanitizer's allocator hooks: its runtime defines operator new and delete itself.
SAN_CC  ?= clang-14
SAN_CXX ?= clang++-14
SAN_TOOLS = -DCMAKE_C_COMPILER=$(SAN_CC) -DCMAKE_CXX_COMPILER=$(SAN_CXX) -DSANDPOOL_LINKER=default

# Only what its ctest run executes (target asan_tests, tests/CMakeLists.txt) and the fuzz
# targets (fuzz_targets, fuzz/CMakeLists.txt: their instrumented sources at -O1, linked to
# this tree's ASan libraries; a tree of their own cost CI a third configuration of the
# product); the product libraries in unity batches (SANDPOOL_UNITY_LIBS, on in every tree).
ASAN_CONFIGURE = cmake -S . -B build-asan $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug $(SAN_TOOLS) \
	  -DSANDPOOL_SANITIZE=address,undefined -DSANDPOOL_FUZZ=ON \
	  -DSANDPOOL_PREBUILT_DIR=$(abspath $(BUILD)) $(CMAKE_ARGS) >/dev/null
asan-build: $(BUILD_DEP)
	@$(ASAN_CONFIGURE)
	@cmake --build build-asan -j $(JOBS) --target asan_tests fuzz_targets

# Only the executables holding tests labelled `threaded` (tests/CMakeLists.txt), the ones ctest
# -L threaded runs; the rest of the tree is not built here.
check-tsan: tsan-build
	@TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --test-dir build-tsan --output-on-failure -j $(CTEST_JOBS) -L threaded

tsan-build: $(BUILD_DEP)
	@cmake -S . -B build-tsan $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug $(SAN_TOOLS) \
	  -DSANDPOOL_SANITIZE=thread -DSANDPOOL_PREBUILT_DIR=$(abspath $(BUILD)) $(CMAKE_ARGS) \
	  >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target threaded_tests

# The fuzz targets live in the ASan tree (asan-build builds them too); fuzz-build builds
# only them, for `make fuzz` alone.
fuzz: fuzz-build
	@FUZZ_DIR=build-asan scripts/fuzz.sh

fuzz-build: $(BUILD_DEP)
	@$(ASAN_CONFIGURE)
	@cmake --build build-asan -j $(JOBS) --target fuzz_targets

bench: build
	@$(BUILD)/bin/sandpool-bench

# The pool core's model test, long: MODEL_SCHEDULES random schedules from MODEL_SEED (make
# test runs 2,000 from seed 1). 300,000 take about 6 min on one core.
MODEL_SCHEDULES ?= 300000
MODEL_SEED ?= 1000000
model: build
	@SANDPOOL_MODEL_SCHEDULES=$(MODEL_SCHEDULES) SANDPOOL_MODEL_SEED=$(MODEL_SEED) \
	  $(BUILD)/bin/manager_tests 'random schedules never strand\, duplicate or wedge a task (model test)'

# The tour through the service: poold on configs/poold.yaml (state under ./var), poolctl.
demo: build
	@scripts/demo.sh $(BUILD)

# The same story without a service, through sandpool-run.
demo-run: build
	@scripts/demo-run.sh $(BUILD)

# poold in the foreground on the development config (Ctrl-C stops it cleanly).
run: build
	@mkdir -p var
	@$(BUILD)/bin/poold --config configs/poold.yaml $(ARGS)

# Installs under the configured prefix (default /usr/local; DESTDIR=... stages it), or under
# PREFIX=...: nothing of the prefix is compiled in that matters (poold finds its worker host
# relative to itself; the unit and the config are rendered at install time), so no rebuild.
install: build
	@cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))
	@echo "installed; for the service see docs/operations.md (systemctl daemon-reload, enable --now sandpool)"

# The Debian package (CPack, packaging/CMakeLists.txt): $(BUILD)/sandpool_<version>-1_<arch>.deb.
package: build
	@cmake --build $(BUILD) --target package

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz  # build-fuzz: the fuzz tree until 2026-12
