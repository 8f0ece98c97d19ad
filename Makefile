# ragen2: `make repro` runs the whole paper pipeline (CPU profile), `make test` the fast test suite.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch that lies on this machine's disk; override on other machines,
# e.g. `make setup TORCH_SPEC=torch` (a CUDA build) on a GPU box.
TORCH_SPEC ?= torch==2.13.0
# Exact versions of every package (pip constraints) that made the committed results; `make setup LOCK=` installs
# from pyproject.toml's ranges instead (e.g. with a CUDA torch), `make lock` refreshes the file.
LOCK ?= requirements-cpu.lock
CONSTRAINTS := $(if $(LOCK),-c $(LOCK))
# The package's extras `make setup` installs: the reproduction, the TRL plug-in, the TensorBoard logger, the tests
# (a practitioner's `pip install .` takes the core library alone; pyproject.toml lists each extra).
EXTRAS ?= repro,trl,tensorboard,dev
PROFILE ?=

# Everything runs offline: no Hub downloads, no telemetry, no DVC analytics.
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_HUB_DISABLE_TELEMETRY := 1
export DVC_NO_ANALYTICS := 1
export DVC_STUDIO_OFFLINE := 1
export TRL_EXPERIMENTAL_SILENCE := 1
export TOKENIZERS_PARALLELISM := false
export MPLBACKEND := Agg

# Pinned math kernels (ragen2/kernels.py, the same values; tests/test_makefile.py checks): ATen and oneDNN at AVX2,
# MKL on its vendor-neutral branch, so that a seed gives the same bits on any x86-64 CPU with AVX2, Intel or AMD.
# `make repro RAGEN2_KERNELS=native` trades the bits for speed (about 2x here). The package's entry points pin the same
# values themselves; a CPU without AVX2 gets no pin (other bits).
RAGEN2_KERNELS ?= avx2
export RAGEN2_KERNELS
HAS_AVX2 := $(shell [ "$$(uname -m)" = x86_64 ] && grep -qw avx2 /proc/cpuinfo 2>/dev/null && echo yes)
ifeq ($(RAGEN2_KERNELS)$(HAS_AVX2),avx2yes)
export ATEN_CPU_CAPABILITY := avx2
export MKL_CBWR := COMPATIBLE
export ONEDNN_MAX_CPU_ISA := AVX2
endif

.PHONY: setup test test-slow test-browser repro regime-map curves screen decline docs lint bench clean-venv params smoke dry-run-paper lock

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml $(LOCK)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check $(CONSTRAINTS) "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet --disable-pip-version-check $(CONSTRAINTS) -e '.[$(EXTRAS)]'
	@# DeepCoder's sandbox uses Debian's bubblewrap; install it when we can (root + apt).
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null) ; } || \
	  echo "WARNING: bubblewrap (bwrap) is not installed; DeepCoder falls back to an rlimit-only sandbox"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (ragen2)" >/dev/null
	touch $@

test: setup
	$(PY) -m pytest -m "not slow and not gpu" -q

test-slow: setup
	$(PY) -m pytest -m "slow and not gpu" -q

# A real browser on JupyterLab (tests/browser_check.py): headless Chromium opens a notebook, runs all cells and
# checks that its figures and ipywidgets sliders render and no output shows an error. Installs Debian's chromium and
# chromium-driver when missing (root + apt) and the `browser` extra, then runs tests/test_browser.py on a tiny
# widget notebook and on BROWSER_NOTEBOOK (default: notebooks 01 and 07, in a scratch copy of a clone without runs:
# they read the results bundle), checking that every cell runs and every figure renders; and opens `dvc plots show`'s
# page with the network cut off, checking that every plot is drawn.
BROWSER_NOTEBOOK ?=
test-browser: setup
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null ; } || \
	  { echo "test-browser needs chromium and chromedriver: apt-get install -y chromium chromium-driver" >&2; exit 1; }
	$(PY) -m pip install --quiet --disable-pip-version-check $(CONSTRAINTS) -e '.[browser]'
	$(if $(BROWSER_NOTEBOOK),RAGEN2_BROWSER_NOTEBOOK=$(abspath $(BROWSER_NOTEBOOK))) $(PY) -m pytest -m slow -q tests/test_browser.py

# DVC 3.67 has no `dvc repro -j`: build the stale warm starts WORKERS at a time (each stage's own command, one torch
# thread: `python -m ragen2.repro build-warm-starts`, recorded in dvc.lock), train the stale runs as Ray tasks, WORKERS at a time
# (one torch thread each, dearest run first: `python -m ragen2.repro train-runs`), recording finished ones in dvc.lock as they
# come (`--commit`: `dvc commit -f` reading dvc.yaml and dvc.lock once per batch, where DVC re-reads both per stage;
# every 10 minutes and at the end, so an interrupted make keeps them), then the stages after training one by one (`dvc repro -s`: each checked on its own, not the 400 stages
# upstream again) and the notebooks of both realizations WORKERS at a time (`python -m ragen2.repro run-stages`), the
# claims last. Each run equals what its stage's own command (`python -m ragen2 train RUN_ID`) makes. An interrupted
# run resumes from its checkpoint; a second `make repro` finds nothing to do. The realization check's runs
# (`--realization`: the same runs from a second warm start, stages warmstart_realization and train_realization) are
# trained the same way, after the first's. First, `python -m ragen2.repro prune-lock` drops the lock entries of stages a
# shrunken grid no longer defines. tests/test_makefile.py checks that the recipe names every stage.
WORKERS ?= 2
NOTEBOOK_STAGES := $(shell sed -n 's/^  \(nb_[a-z0-9_]*\):.*/\1/p' dvc.yaml)
repro: export PATH := $(abspath $(VENV))/bin:$(PATH)
repro: setup
	$(PY) -m ragen2.repro prune-lock
	$(PY) -m ragen2.repro build-warm-starts --workers $(WORKERS)
	dvc repro warmstart warmstart_realization
	for which in "" --realization; do \
	  stale="$$($(PY) -m ragen2.repro stale-runs $$which)" || exit 1; [ -z "$$stale" ] && continue; \
	  $(PY) -m ragen2.repro train-runs $$which --commit --workers $(WORKERS) --threads 1 --cache-dir data/cache \
	    $$stale || exit 1; \
	done
	dvc repro -s data warm_starts inputs inputs_realization
	$(PY) -m ragen2.repro run-stages --workers $(WORKERS) $(NOTEBOOK_STAGES)
	dvc repro -s claims publish plot_data bundle

# A pipeline of its own beside the paper's, run the way `make repro` runs the paper's: warm starts WORKERS at a time,
# the stale runs as Ray tasks, WORKERS at a time (one torch thread each), then its notebook stage. $(1): its folder, which holds
# its dvc.yaml and params.yaml; its warm starts and runs live under data/$(1)/. $(2), optional: stages of it that run
# next, WORKERS at a time, before the rest (independent of each other: one per run).
define own_pipeline
	$(PY) -m ragen2.repro prune-lock --dvc-file $(1)/dvc.yaml
	$(PY) -m ragen2.repro build-warm-starts --params $(1)/params.yaml --dvc-file $(1)/dvc.yaml --workers $(WORKERS)
	dvc repro $(1)/dvc.yaml:warmstart
	stale="$$($(PY) -m ragen2.repro stale-runs --params $(1)/params.yaml --dvc-file $(1)/dvc.yaml)" || exit 1; \
	if [ -n "$$stale" ]; then \
	  $(PY) -m ragen2.repro train-runs --params $(1)/params.yaml --dvc-file $(1)/dvc.yaml --commit --workers $(WORKERS) \
	    --threads 1 --cache-dir data/$(1)/cache $$stale || exit 1; fi
	$(if $(2),$(PY) -m ragen2.repro run-stages --dvc-file $(1)/dvc.yaml --workers $(WORKERS) $(2))
	dvc repro $(1)/dvc.yaml
endef

# The regime map (ragen2/repro/regime_map.py, docs/preregistrations.md §7.11): a screening study with its own pipeline,
# regime_map/dvc.yaml (notebook 09_regime_map). Its measured time: README Status.
regime-map: export PATH := $(abspath $(VENV))/bin:$(PATH)
regime-map: setup
	$(call own_pipeline,regime_map)

# The paper's success curves on SearchQA and WebShop (ragen2/repro/multiturn_curves.py, docs/preregistrations.md §7.14): a
# pipeline of its own, curves/dvc.yaml (notebook 10_multiturn_curves). Its measured time: README Status.
curves: export PATH := $(abspath $(VENV))/bin:$(PATH)
curves: setup
	$(call own_pipeline,curves)

# The learning-regime screen (ragen2/repro/learning_screen.py, docs/preregistrations.md §7.15): where does no-filter RL
# learn at CPU scale? A pipeline of its own, screen/dvc.yaml (notebook 11_learning_screen).
screen: export PATH := $(abspath $(VENV))/bin:$(PATH)
screen: setup
	$(call own_pipeline,screen,evaluate)

# The decline study (ragen2/repro/decline_study.py, docs/preregistrations.md §7.19): the filter through the peak and the
# decline, PPO and GRPO, 64 runs of 200 steps, about five hours on two cores; a pipeline of its own, decline/dvc.yaml
# (notebook 12_decline). Trained in chunks of DECLINE_CHUNK runs in params order (GRPO first), each chunk's runs
# recorded in decline/dvc.lock and bundled (data/bundle/decline/runs/, git-tracked) as the chunk ends, so an interrupted
# make keeps every finished chunk (4 runs: two rounds of the two workers, about 15 minutes, the most an interruption
# loses); a run finished in the committed bundle is not trained again (a later checkout has lost its run folder). Its
# notebook reads the bundle.
DECLINE_CHUNK ?= 4
decline: export PATH := $(abspath $(VENV))/bin:$(PATH)
decline: setup
	$(PY) -m ragen2.repro prune-lock --dvc-file decline/dvc.yaml
	$(PY) -m ragen2.repro build-warm-starts --params decline/params.yaml --dvc-file decline/dvc.yaml --workers $(WORKERS)
	dvc repro decline/dvc.yaml:warmstart
	dvc repro -s decline/dvc.yaml:bundle_warm_start
	stale="$$($(PY) -m ragen2.repro stale-runs --params decline/params.yaml --dvc-file decline/dvc.yaml \
	  --skip-bundled data/bundle/decline/runs)" || exit 1; \
	echo $$stale | xargs -r -n $(DECLINE_CHUNK) echo | while read -r chunk; do \
	  $(PY) -m ragen2.repro train-runs --params decline/params.yaml --dvc-file decline/dvc.yaml --commit \
	    --workers $(WORKERS) --threads 1 --cache-dir data/decline/cache $$chunk || exit 1; \
	  for rid in $$chunk; do dvc repro -s -q decline/dvc.yaml:bundle@$$rid || exit 1; done; \
	done
	dvc repro -s decline/dvc.yaml:notebook decline/dvc.yaml:publish

# docs/environments.md is generated from the environments' docstrings (ragen2/envdoc.py; a test checks for drift).
docs: setup
	$(PY) -m ragen2.envdoc --write docs/environments.md
	PATH=$(abspath $(VENV))/bin:$$PATH $(PY) -m ragen2.repro.stage_graph

# params.yaml and the own pipelines' dvc.yaml files are generated: edit ragen2/repro/profiles.py or the pipeline's
# module, then `make params` (tests check there is no drift).
params: setup
	$(PY) -m ragen2 profile cpu --write params.yaml
	$(PY) -m ragen2 profile cpu --estimate
	$(PY) -m ragen2.repro.dvc_files

# The smoke profile (ragen2/repro/profiles.py) in a scratch copy, so params.yaml, dvc.lock and data/ of this checkout stay
# untouched: its main runs are the CPU profile's first seed of no filter, Top-p and Top-k cut to 40 steps (long enough to
# show template collapse beside a run that keeps its MI), every other study tiny (2 steps: the plumbing). Trained the
# way `make repro` trains (warm starts and runs WORKERS at a time), then the eight notebooks; no realization check, no
# warm-start table and no claims stage (`make dry-run-paper` runs those). Then start this checkout's JupyterLab in the
# scratch copy (the last line says how: `cd $(SMOKE_DIR) && <this checkout>/.venv/bin/jupyter lab`).
SMOKE_DIR ?= /tmp/ragen2-smoke
smoke: export PATH := $(abspath $(VENV))/bin:$(PATH)
smoke: setup
	rm -rf $(SMOKE_DIR) && mkdir -p $(SMOKE_DIR)
	tar --exclude=__pycache__ -cf - ragen2 notebooks dvc.yaml pyproject.toml | tar -xf - -C $(SMOKE_DIR)
	cd $(SMOKE_DIR) && time { $(abspath $(PY)) -m ragen2 profile smoke --write params.yaml && dvc init --no-scm -q && \
	  $(abspath $(PY)) -m ragen2.repro build-warm-starts --no-realization --workers $(WORKERS) && dvc repro warmstart && \
	  stale="$$($(abspath $(PY)) -m ragen2.repro stale-runs)" && \
	  $(abspath $(PY)) -m ragen2.repro train-runs --commit --workers $(WORKERS) --threads 1 --cache-dir data/cache $$stale && \
	  dvc repro -s data inputs && \
	  $(abspath $(PY)) -m ragen2.repro run-stages --workers $(WORKERS) $(filter-out nb_realization,$(NOTEBOOK_STAGES)); }
	@echo "smoke pipeline done: $(SMOKE_DIR)/paper_figures; to step through its notebooks: cd $(SMOKE_DIR) && $(abspath $(VENV))/bin/jupyter lab"

# The paper profile's whole pipeline as a dry run (ragen2/repro/dry_run.py, docs/paper_profile.md): its run grid,
# cut to 37 runs of 2 steps, with a tiny random Qwen2 (taught the format by a short SFT) in place of
# Qwen2.5-3B, HF rollouts on the CPU, in a scratch copy like `make smoke`; every notebook through papermill.
DRY_RUN_DIR ?= /tmp/ragen2-dry-run-paper
dry-run-paper: setup
	rm -rf $(DRY_RUN_DIR)
	time PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m ragen2.repro.dry_run run --copy-from . --root $(DRY_RUN_DIR) \
	  --workers $(WORKERS)
	@echo "paper dry run done: $(DRY_RUN_DIR)/paper_figures"

lint: setup
	$(VENV)/bin/ruff check ragen2 tests

# The bench (ragen2/bench): every figure side by side in one process, kept as a dated record in data/bench/ (commit,
# CPU, kernels, threads, load before and after); docs/performance.md's tables are made from the records. Run it on an
# idle machine, then commit the record with the regenerated page.
bench: setup
	$(PY) -m ragen2.bench --record data/bench
	$(PY) -m ragen2.bench.records --write docs/performance.md

# Re-resolve every package from pyproject.toml's ranges in a scratch venv and write the lock file. Commit it
# together with results made in that environment (a new lock changes floating-point results).
LOCK_VENV ?= /tmp/ragen2-lock-venv
lock:
	rm -rf $(LOCK_VENV) && python3 -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)"
	$(LOCK_VENV)/bin/pip install --quiet --disable-pip-version-check -e '.[$(EXTRAS)]'
	{ echo "# The exact environment of the committed results (CPU profile, Python $$($(LOCK_VENV)/bin/python -c 'import platform; print(platform.python_version())'), $$(uname -m)), used by \`make setup\` as pip"; \
	  echo "# constraints. Refresh with \`make lock\` (a fresh venv from pyproject.toml's ranges, then pip freeze)."; \
	  $(LOCK_VENV)/bin/pip freeze --exclude-editable --disable-pip-version-check; } > requirements-cpu.lock
	rm -rf $(LOCK_VENV)

clean-venv:
	rm -rf $(VENV)
