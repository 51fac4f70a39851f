# Two entry points for a fresh machine (Python 3.11+, Node.js 18+ with npm):
#   make synth   set up, then synthesize every stack offline into cdk.out/
#   make test    set up, then run every test
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

# Node.js 22 from package.json runs both the CDK CLI and the app's jsii runtime (Node 20 is EOL).
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)
# Offline by default: never probe EC2 instance metadata, send no CLI telemetry.
export AWS_EC2_METADATA_DISABLED ?= true
export CDK_DISABLE_CLI_TELEMETRY ?= true
# Cache compiled modules (and pytest's rewritten test modules) in __pycache__/ even where the shell
# sets PYTHONDONTWRITEBYTECODE: each test session starts ~80 Python processes (pytest workers, synths,
# `python -m specbench` runs) that would otherwise all compile the project again (collection alone
# 7.2 s -> 2.5 s a worker).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: synth manifest-sizes test demo demo-sweep demo-load-sweep bench-sweep bench-staged-sweep deps dev-deps lint lock bench bench-client bench-chunk-lag bench-suite bench-aggregation mutation dist preflight clean

synth: deps
	npx cdk synth --quiet
	@echo "templates: cdk.out/SpecDecodeData.template.json cdk.out/SpecDecodePlatform.template.json"

# Each manifest the kubectl provider applies, in bytes, against its budget (a quarter of the 256 KB
# payload limit; scripts/manifest_sizes.py): exits 1 when one is over.
manifest-sizes: synth
	$(BIN)/python scripts/manifest_sizes.py cdk.out

# The tests' temporary folders on tmpfs where the machine has one: the result stores fsync every file
# they write (specbench/results/store.py), 3-4 ms a call on this machine's disk and free on tmpfs, and
# the suite writes thousands. Override with TEST_TMPDIR=<folder>.
TEST_TMPDIR ?= $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && echo /dev/shm)

# One pytest-xdist worker more than there are cores: about a third of the suite's worker time is
# spent waiting on loopback servers in real time (`make bench-suite`: tests waiting), and a third
# worker runs tests on the core a waiting one leaves idle (2 cores: 74 s with 2 workers, 64 s with
# 3, 69 s with 4, whose start-up and collection cost 2.5 s of CPU each; docs/performance.md).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))

test: dev-deps
	$(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR) )$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup

# The product's output offline, no AWS account: emulated services + moto, benchmark, dashboard, report.
demo: dev-deps
	$(BIN)/python scripts/demo.py --out demo-output

# A small sweep (baseline + 5 values of k x 2 loads) against emulators with a known optimum k per
# class; prints the recovered optima beside the truth and writes the sweep report.
demo-sweep: dev-deps
	$(BIN)/python scripts/demo_sweep.py --out demo-sweep-output

# TPOT and throughput against load on batching emulators: the crossover the analysis finds beside the
# serving model's prediction (docs/serving-model.md).
demo-load-sweep: dev-deps
	$(BIN)/python scripts/demo_load_sweep.py

deps: $(VENV)/.runtime node_modules/.installed
dev-deps: deps $(VENV)/.dev

$(VENV)/.runtime: requirements.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check --quiet -r requirements.txt
	touch $@

$(VENV)/.dev: requirements-dev.txt specbench/requirements.txt specbench/requirements-report.txt $(VENV)/.runtime
	$(BIN)/pip install --disable-pip-version-check --quiet -r requirements-dev.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

lint: dev-deps synth
	$(BIN)/ruff check . && $(BIN)/ruff format --check .
	$(BIN)/cfn-lint --regions us-east-2 -- cdk.out/*.template.json

# Read the account (read-only, your credentials) for what `cdk deploy` needs, one line per check
# (docs/preflight.md): make preflight [CONTEXT="-c key=value ..."]. GNU make exits 2 whenever a
# recipe fails ("How to Run make"), so preflight's own code (1 a failure, 2 bad settings, 3 warnings
# only) cannot reach the shell through make: the recipe prints it, and scripts/preflight (the
# README's command) exits with it. Instance metadata stays off as in every target: on an EC2
# instance role, run it with AWS_EC2_METADATA_DISABLED=false.
PREFLIGHT_MEANING := ([1]="a check failed" [2]="bad arguments or settings" [3]="warnings only")
preflight: $(VENV)/.runtime
	@scripts/preflight $(CONTEXT); code=$$?; meaning=$(PREFLIGHT_MEANING); \
	if [ $$code -ne 0 ]; then echo "make preflight: preflight exited $$code ($${meaning[$$code]:-see docs/preflight.md}); GNU make reports any failure as 2; scripts/preflight with the same -c settings exits $$code itself" >&2; fi; \
	exit $$code

# Plain YAML of the serving objects (the same charts cdk deploy applies) for kubectl or GitOps:
#   make dist BUCKET=<DataBucketName output of SpecDecodeData> [CONTEXT="-c key=value ..."]
dist: deps
	@test -n "$(BUCKET)" || { echo "usage: make dist BUCKET=<the DataBucketName output of the SpecDecodeData stack>" >&2; exit 2; }
	$(BIN)/python -m charts.dist --bucket-name "$(BUCKET)" $(CONTEXT)

# The benchmark pod's hash lock (pip --require-hashes): every pin of specbench/requirements.txt with
# the sha256 of the files pip picks for the Job's Python 3.10 on x86_64 and arm64. Needs a Python
# 3.10 (PYTHON310=...). Rerun after changing requirements.txt: tests fail until the two agree.
PYTHON310 ?= python3.10
lock:
	$(PYTHON) scripts/lock_requirements.py --python "$(PYTHON310)"

bench: dev-deps
	$(BIN)/python scripts/bench_synth.py

bench-staged-sweep: dev-deps
	$(BIN)/python scripts/bench_staged_sweep.py

bench-client: dev-deps
	$(BIN)/python scripts/bench_client.py

bench-chunk-lag: dev-deps
	$(BIN)/python scripts/bench_chunk_lag.py

# Where make test's time goes: collection, syntheses, lint, test bodies, idle workers (docs/performance.md).
bench-suite: dev-deps
	$(BIN)/python scripts/bench_suite.py

bench-aggregation: dev-deps
	$(BIN)/python scripts/bench_aggregation.py

bench-sweep: dev-deps
	$(BIN)/python scripts/bench_sweep.py

# Mutation score of the measurement math and the configuration rules, each module against its own
# fast tests (scripts/mutation.toml: targets, minimum scores, equivalent mutants). Not in `make test`
# or CI: minutes, at nice 19. One module: make mutation MODULES=specbench/analysis/stats.py
mutation: $(VENV)/.mutation
	$(BIN)/python scripts/mutation.py $(MODULES)

$(VENV)/.mutation: requirements-mutation.txt $(VENV)/.dev
	$(BIN)/pip install --disable-pip-version-check --quiet -r requirements-mutation.txt
	touch $@

clean:
	rm -rf cdk.out .pytest_cache demo-output demo-sweep-output
