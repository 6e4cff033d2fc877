# The two commands of the README. PYTHON may point at a venv's interpreter.
PYTHON ?= python3
PIP := $(PYTHON) -m pip

.PHONY: install install-dev demo check test bench lint install-ns3 test-ns3 crosscheck

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

# Optional ns-3 cross-check (README "Fidelity"): the extra ns3 (ns-3.44's Python bindings, about 520 MB;
# cppyy compiles parts at install, so a C++ compiler must be present). Use a venv of its own.
install-ns3: install-dev
	$(PIP) install --quiet -e ".[rl,dev,ns3]"

# The cross-check's tests with ns-3 (the smallest case runs in ns-3; skipped where the extra is missing).
test-ns3:
	$(PYTHON) -m pytest -q tests/test_crosscheck.py

# The calibration table of README "Fidelity": every case under ecmp, spray and lp, fluid vs ns-3.
crosscheck:
	$(PYTHON) -c "import sys; from ainet_gym.crosscheck import main; sys.exit(main())" --out crosscheck-results.json
