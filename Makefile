# agentrl_recipe — set-up is two commands: `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON_BOOTSTRAP ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.install-stamp
# System packages the sandbox needs: bubblewrap (isolation) and Debian's python3 (the interpreter inside the sandbox;
# the pyenv/venv interpreter under root's 0700 home is not readable by the sandbox uid).
APT_PACKAGES := bubblewrap python3
TORCH_PIN := torch==2.13.0
PYTEST_ARGS ?=

.PHONY: help install system-deps test lint format

help:  ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-14s %s\n", $$1, $$2}'

install: system-deps $(STAMP)  ## create .venv and install the package with its test extra (instant when done)

system-deps:
	@missing=""; command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	[ -x /usr/bin/python3 ] || missing="$$missing python3"; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

$(STAMP): pyproject.toml
	@[ -x $(PY) ] || $(PYTHON_BOOTSTRAP) -m venv $(VENV)
	# torch first (same pip call) so pip takes the CPU wheel instead of a multi-GB CUDA build on CPU machines.
	$(PIP) install -q $(TORCH_PIN) -e '.[test]'
	@touch $(STAMP)

test: install  ## run the whole CPU test suite
	$(PY) -m pytest $(PYTEST_ARGS)

lint: install  ## ruff check + format check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# --- evaluation (agentrl_recipe/eval): the paper's protocol unless ARGS changes it; rerun with the same OUT to resume.
.PHONY: eval
eval: install  ## evaluate MODEL on DATA (eval parquet files/folders) with the paper's protocol [OUT=run dir] [ARGS=flags]
	@if [ -z "$(MODEL)" ] || [ -z "$(DATA)" ]; then \
	  echo "usage: make eval MODEL=<HF dir or id> DATA=<eval parquet(s)> [OUT=runs/eval/<name>] [ARGS='-k 4 --limit 2']"; \
	  exit 2; fi
	$(VENV)/bin/agentrl-recipe eval run --model $(MODEL) --data $(DATA) $(if $(OUT),--out $(OUT)) $(ARGS)
