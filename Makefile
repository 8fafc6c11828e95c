# seedvar: `make study` runs the main job, `make test` the checks; both build .venv first.
# .venv is installed from a hash-checked lock (requirements/$(LOCK).txt) and reinstalled
# when that lock changes. LOCK is gpu where nvidia-smi exists, cpu elsewhere.

PYTHON  ?= python3.11
VENV    ?= .venv
LOCK    ?= $(if $(shell command -v nvidia-smi),gpu,cpu)
PROFILE ?=
PYTEST_ARGS ?=
PYTEST_WORKERS ?= 2
DVC     ?= dvc
# where `make lock` finds the CPU build of torch (this machine: PIP_FIND_LINKS, /opt/wheels)
TORCH_CPU_WHEELS ?= $(or $(PIP_FIND_LINKS),https://download.pytorch.org/whl/cpu/torch/)

STAMP := $(VENV)/.installed-$(LOCK)
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(VIRTUAL_ENV)/bin:$(PATH)

.PHONY: help study test lock docs system

help:  ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

study: $(STAMP)  ## the study: `dvc repro` (params.yaml); PROFILE=cpu|paper|smoke: that profile's study
ifdef PROFILE
	seeds=$$(seedvar config --no-params --profile $(PROFILE) --get seeds) && \
	  $(DVC) exp run -S profile=$(PROFILE) -S "seeds=$$seeds"
else
	$(DVC) repro
endif

# Debian packages the tests need: PostgreSQL (the shared-store tests start a server), Chromium
# and its WebDriver (the MLflow UI test)
SYSTEM_PACKAGES = postgresql chromium chromium-driver

system:  ## install the Debian packages the tests need (as root with apt), else name them and stop
	@missing=$$(for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
	  echo "make: the tests need the Debian packages" $$missing": apt-get install" $$missing; exit 2; fi; \
	echo "installing the Debian packages the tests need:" $$missing; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null

test: system $(STAMP)  ## lint, format and type checks, docs build (if mkdocs.yml), pytest (PYTEST_ARGS='-m "not slow"'; PYTEST_WORKERS=0: in one process)
	ruff check .
	ruff format --check .
	mypy
	if [ -f mkdocs.yml ]; then NO_MKDOCS_2_WARNING=1 mkdocs build --strict; fi
	python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

docs: $(STAMP)  ## write docs/configuration.md's settings table from defaults.yaml
	python docs/hooks/config_reference.py

LOCK_FLAGS = pyproject.toml --extra dev --extra offline --extra ray --extra docs --extra bench \
	--constraint requirements/torch.txt --generate-hashes --python-version 3.11 \
	--python-platform x86_64-manylinux_2_28 --custom-compile-command 'make lock'

lock: $(STAMP)  ## regenerate requirements/cpu.txt and gpu.txt from pyproject.toml (uv)
	uv pip compile $(LOCK_FLAGS) --find-links $(TORCH_CPU_WHEELS) -o requirements/cpu.txt
	uv pip compile $(LOCK_FLAGS) -o requirements/gpu.txt
	for l in cpu gpu; do sed -i "2r requirements/$$l.header" requirements/$$l.txt; done

CUDA_CHECK = import sys, torch; sys.exit(torch.version.cuda is None and \
	f'torch {torch.__version__} is a CPU build under the GPU lock: remove $(VENV), run make again')

# A .venv built from the other lock is built anew: pip keeps an installed torch+cpu that satisfies
# the GPU lock's pin. After the GPU lock, torch must be a CUDA build.
$(STAMP): requirements/$(LOCK).txt
	if ls $(VENV)/.installed-* 2>/dev/null | grep -qvx '$(STAMP)'; then \
	  echo "$(VENV) was built from another lock: building it from requirements/$(LOCK).txt"; \
	  rm -rf $(VENV); fi
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --require-hashes -r requirements/$(LOCK).txt
	$(VENV)/bin/python -m pip install --no-deps --no-build-isolation -e .
	$(if $(filter gpu,$(LOCK)),$(VENV)/bin/python -c "$(CUDA_CHECK)")
	rm -f $(VENV)/.installed-* && touch $@
