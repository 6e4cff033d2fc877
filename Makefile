# The two commands of the README. PYTHON may point at a venv's interpreter.
PYTHON ?= python3
PIP := $(PYTHON) -m pip

.PHONY: install install-dev demo check test bench lint check-rllib

# torch first, pinned to a release with a CPU wheel (SB3 needs torch; an unpinned install may pull a
# newer multi-GB CUDA build). Any torch >= 2.3 works: install your own first to skip this.
install:
	$(PYTHON) -c "import torch" 2>/dev/null || $(PIP) install --quiet "torch==2.13.0" || $(PIP) install --quiet "torch>=2.3"
	$(PIP) install --quiet -e ".[rl]"

install-dev: install
	$(PIP) install --quiet -e ".[rl,dev]"

# Main job: short PPO training on the default scenario, then evaluation against every baseline.
demo: install
	$(PYTHON) -m ainet_gym.cli demo

# Install with the dev extras, lint, run the tests (what CI runs).
check: install-dev lint test

test:
	$(PYTHON) -m pytest -q -n 2 tests

bench:
	$(PYTHON) -m ainet_gym.cli bench

lint:
	ruff check . && ruff format --check .

# RLlib: install the rllib extra (ray[rllib] pins its own gymnasium, so use a fresh venv's interpreter:
# make check-rllib PYTHON=/path/to/venv/bin/python) and run only the RLlib tests.
check-rllib:
	$(PYTHON) -c "import torch" 2>/dev/null || $(PIP) install --quiet "torch==2.13.0" || $(PIP) install --quiet "torch>=2.3"
	$(PIP) install --quiet -e ".[rl,dev,rllib]"
	$(PYTHON) -m pytest -q tests/test_rllib.py
