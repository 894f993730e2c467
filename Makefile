# Two commands a new user needs: `make demo` and `make test`. Both create .venv and install
# everything themselves. torch==2.13.0 goes in first so pip never resolves a CUDA build.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed

.PHONY: demo sft-start squeeze squeeze-worlds squeeze-learns test test-slow test-ray test-integrations bench lint typecheck docs dist clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	@echo "[venv 1/4] creating $(VENV) with $(PYTHON)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "[venv 2/4] upgrading pip"
	$(PIP) install -q --upgrade pip
	@echo "[venv 3/4] installing torch==2.13.0 (a large download: minutes)"
	$(PIP) install --progress-bar on torch==2.13.0
	@echo "[venv 4/4] installing searchgym and its extras .[all,dev] (minutes)"
	$(PIP) install --progress-bar on -e ".[all,dev]"
	touch $(STAMP)
	@echo "venv ready: $(VENV)"

# Each run writes a new directory (runs/demo-YYYYmmdd-HHMMSS): an earlier report is never deleted. The demo's
# arms start from the SFT start shipped in the package (searchgym/experiments/squeeze/sft_start/). Its time
# (about 2.5 minutes on 2 otherwise idle cores: 154 s from a fresh clone on 2026-11-27) excludes creating .venv (a first `make demo` also installs torch
# and the extras: minutes more, mostly download); on a busy machine it takes longer. It prints a progress line at
# least every 10 s and its own wall time at the end.
demo: $(STAMP)
	@stamp=$$(date +%Y%m%d-%H%M%S); out=runs/demo-$$stamp; n=1; \
	while [ -e $$out ]; do n=$$((n+1)); out=runs/demo-$$stamp-$$n; done; \
	echo "demo run directory: $$out (about 2.5 minutes on 2 idle cores; the venv is ready)"; t0=$$(date +%s); \
	$(VENV)/bin/searchgym squeeze --quick --out $$out && \
	echo "report: $$out/report.md ($$out/report.html); demo took $$(( $$(date +%s) - t0 )) s"

# Regenerate the shipped SFT start bit-for-bit from its seed (after a change to the world or the demonstrator).
sft-start: $(STAMP)
	$(VENV)/bin/searchgym squeeze --only-start --ship-start --out runs/start

# The full experiment; its figures become the README headline.
squeeze: $(STAMP)
	$(VENV)/bin/searchgym squeeze --out runs/squeeze --readme README.md

# The LM comparison on world seeds 1-5, each with its own SFT start (about 20 minutes each). A start that fails
# the competence gate stops its world there (exit code 3): on 2026-11-26 worlds 2-4 did
# (results/squeeze-worlds-v3-gates.md). Then the headline is pooled over the worlds whose starts pass. World 0 is
# `make squeeze`'s run, and --resume continues an interrupted world. About 70 minutes per passing world on 2 cores.
WORLDS ?= 1 2 3 4 5
squeeze-worlds: $(STAMP)
	for w in $(WORLDS); do $(VENV)/bin/searchgym squeeze --out runs/squeeze-w$$w --world-seed $$w --start-from train \
	    --arms sft,grpo,grpo_kl,grpo_critique --strategy-seeds 0 --resume --stop-on-failed-gate; \
	    rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 3 ] || exit $$rc; done
	$(VENV)/bin/searchgym squeeze --headline --out runs/squeeze \
	    --worlds $$(for w in $(WORLDS); do printf 'runs/squeeze-w%s,' $$w; done) --readme README.md

# The squeeze at the dose that learns (--preset learns: lr 2e-4 x 100 steps) with both controls, 6 seeds: world 0
# from the shipped start, world 1 from the start stored with the dose probe (docs/squeeze.md, "The squeeze at the
# dose that learns"). About an hour per world on 2 cores; --resume continues an interrupted world.
LEARNS_ARMS ?= sft,grpo,rs_sft,grpo_shuffled
squeeze-learns: $(STAMP)
	$(VENV)/bin/searchgym squeeze --preset learns --arms $(LEARNS_ARMS) --seeds 6 --strategy-seeds 0 --passk-max 0 \
	    --out runs/learns-w0 --resume
	$(VENV)/bin/searchgym squeeze --preset learns --world-seed 1 --start-from results/dose-probe-lr2e-4-world1/start \
	    --arms $(LEARNS_ARMS) --seeds 6 --strategy-seeds 0 --passk-max 0 --out runs/learns-w1 --resume

# `make test`: the fast suite (under 5 minutes on 2 cores). `make test-slow`: the benchmarks, end-to-end soaks and
# full pipeline runs (-m slow); .ci/run runs both. SLOW_ARGS narrows the slow run (.ci/run leaves out what its other
# steps already run).
SLOW_ARGS ?=
# The fast suite in parallel (pytest-xdist): one worker per core, at most 4; TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= auto
test: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --maxprocesses 4 --dist worksteal

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow $(SLOW_ARGS)

# searchgym serve-ray on a local multi-node Ray cluster (ray.cluster_utils, loopback only): a few minutes on 2 cores.
test-ray: $(STAMP)
	$(PY) -m pytest -q -m slow tests/test_serve_ray.py

# The outside trainers' own entry points (TRL GRPOTrainer, OpenEnv server + client) in the main venv, then
# verl's in its own venv: verl 0.9.1 pins transformers < 5.11, which the main venv cannot share.
VERL_VENV  ?= .venv-verl
VERL_STAMP := $(VERL_VENV)/.installed

$(VERL_STAMP): pyproject.toml
	test -x $(VERL_VENV)/bin/python || $(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install -q --upgrade pip
	$(VERL_VENV)/bin/python -m pip install -q torch==2.13.0
	$(VERL_VENV)/bin/python -m pip install -q -e ".[verl,dev]"
	touch $(VERL_STAMP)

test-integrations: $(STAMP) $(VERL_STAMP)
	$(PY) -m pytest -q -m slow tests/test_integrations_trl.py tests/test_integrations_openenv.py
	$(VERL_VENV)/bin/python -m pytest -q tests/test_integrations_verl.py

bench: $(STAMP)
	$(PY) scripts/bench_retrieval.py
	$(PY) scripts/bench_index_load.py
	$(PY) scripts/bench_server.py
	$(PY) scripts/bench_world.py
	$(PY) scripts/bench_env.py
	$(PY) scripts/bench_agents.py
	$(PY) scripts/bench_diversity.py
	$(PY) scripts/bench_train.py

lint: $(STAMP)
	$(VENV)/bin/ruff check searchgym scripts tests

# mypy --strict on the public names of searchgym.envs, .retrieval and .diversity: stubgen writes their public
# signatures (no private names, no bodies) and mypy checks the stubs; config in pyproject.toml [tool.mypy].
TYPECHECK_DIR := build/typecheck
typecheck: $(STAMP)
	rm -rf $(TYPECHECK_DIR)
	$(VENV)/bin/stubgen searchgym -o $(TYPECHECK_DIR) -q --no-import
	cd $(TYPECHECK_DIR) && $(abspath $(VENV))/bin/mypy --config-file $(CURDIR)/pyproject.toml \
		--cache-dir $(CURDIR)/build/.mypy_cache searchgym/envs searchgym/retrieval searchgym/diversity

# The documentation site (MkDocs Material + mkdocstrings) into site/; --strict: every warning is an error.
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): $(STAMP)
	$(PIP) install -q -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# Wheel and sdist into dist/ (tests/test_wheel_install.py installs the wheel into a fresh venv).
dist: $(STAMP)
	$(PY) -m build --no-isolation --outdir dist .

clean:
	rm -rf $(VENV) $(VERL_VENV) build dist site *.egg-info
