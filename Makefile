# The README's two commands: `make demo` (install, run the main job) and `make check` (install, lint, test).
# Both create a virtual environment in .venv/ on first use (python3 -m venv), so nothing is installed into
# the system Python. PYTHON=/path/to/python uses another interpreter (a venv of yours) instead; every tool
# is called as `$(PYTHON) -m ...`, so that venv need not be activated.
VENV ?= .venv
PYTHON ?= $(VENV)/bin/python
PIP := $(PYTHON) -m pip
# Optional: a PyTorch wheel index (e.g. PyTorch's CPU-only index) to take torch from; see docs/getting-started.md ("PyTorch").
TORCH_INDEX_URL ?=
# Extra flags for `ainet-gym demo` (CI runs `make demo DEMO_ARGS=--quick`).
DEMO_ARGS ?=

.PHONY: venv install install-dev demo check test bench lint docs check-rllib install-ns3 check-ns3 crosscheck \
	check-examples learning-curves check-cluster

venv:
	@if [ "$(PYTHON)" = "$(VENV)/bin/python" ] && [ ! -x "$(PYTHON)" ]; then \
		echo "creating the virtual environment $(VENV)/"; python3 -m venv $(VENV); fi

# torch first: with no torch installed, `pip install torch` from PyPI on Linux x86_64 takes the CUDA build
# (several GB with its nvidia-* packages). A torch you installed first (e.g. the CPU build from PyTorch's
# CPU wheel index, TORCH_INDEX_URL=...) is kept. Any torch >= 2.3 works.
install: venv
	@$(PYTHON) -c "import torch" 2>/dev/null || \
		if [ -n "$(TORCH_INDEX_URL)" ]; then $(PIP) install --quiet torch --index-url "$(TORCH_INDEX_URL)"; \
		else $(PIP) install --quiet "torch==2.13.0" || $(PIP) install --quiet "torch>=2.3"; fi
	$(PIP) install --quiet -e ".[rl]"

install-dev: install
	$(PIP) install --quiet -e ".[rl,dev,pettingzoo]"

# Main job: PPO training on the default scenario, then evaluation against every baseline.
demo: install
	$(PYTHON) -m ainet_gym.cli demo $(DEMO_ARGS)

# Install with the dev extras, lint, run the tests (what CI runs).
check: install-dev lint test

test:
	$(PYTHON) -m pytest -q -n 2 tests

bench:
	$(PYTHON) -m ainet_gym.cli bench

lint:
	$(PYTHON) -m ruff check . && $(PYTHON) -m ruff format --check .

# The docs site (docs/, mkdocs.yml) into site/, with warnings as errors. Installs the extra `docs` (mkdocs,
# mkdocs-material, mkdocstrings-python) and the package into $(PYTHON) if either is missing; the hook
# docs/_scripts/gen_pages.py imports ainet_gym to generate the env, scenario, API and CLI pages.
docs: venv
	@$(PYTHON) -c "import ainet_gym, mkdocs, material, mkdocstrings_handlers.python" 2>/dev/null || \
		$(PIP) install --quiet -e ".[docs]"
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict --site-dir site

# RLlib: ray[rllib] pins its own gymnasium, so its tests run in a second virtual environment, .venv-rllib/
# (RLLIB_VENV=DIR for another one; RLLIB_PYTHON=/path/to/python for a venv of yours): installs
# .[rl,dev,rllib] there (torch first, as `install`) and runs tests/envs/test_rllib.py and the doc page whose blocks
# need Ray (docs/cluster.md; tests/project/test_docs.py skips them without it).
RLLIB_VENV ?= .venv-rllib
RLLIB_PYTHON ?= $(RLLIB_VENV)/bin/python
check-rllib:
	$(MAKE) install VENV=$(RLLIB_VENV) PYTHON=$(RLLIB_PYTHON)
	$(RLLIB_PYTHON) -m pip install --quiet -e ".[rl,dev,rllib]"
	$(RLLIB_PYTHON) -m pytest -q tests/envs/test_rllib.py
	$(RLLIB_PYTHON) -m pytest -q tests/project/test_docs.py -k "docs/cluster.md"

# The research-code examples (docs/research-code.md): the extra `examples` (tyro, rl_zoo3, tianshou) and a
# smoke run of each (CleanRL-style PPO continuous and discrete, DQN; RL Baselines3 Zoo PPO; Tianshou DQN), and
# the blocks of docs/research-code.md, which tests/project/test_docs.py skips without the extra.
check-examples: install
	$(PIP) install --quiet -e ".[rl,dev,examples]"
	$(PYTHON) -m pytest -q tests/agents/test_research_examples.py
	$(PYTHON) -m pytest -q tests/project/test_docs.py -k "docs/research-code.md"

# The learning curves of docs/research-code.md (docs/img/learning-*.png and learning-curves.json): every
# example at its documented budget, one after the other (long: about 1-2 hours on 2 busy cores).
learning-curves: install
	$(PIP) install --quiet -e ".[rl,examples]"
	$(PYTHON) examples/learning_curves.py

# A real multi-node Ray cluster on this machine (docs/cluster.md): a head and two worker nodes on
# 127.0.0.2-4, RLlib PPO whose env runners run on the workers, each worker killed mid-run in turn; in the
# RLlib venv (as check-rllib). CLUSTER_DIR=DIR keeps the nodes' logs and checkpoints there.
CLUSTER_DIR ?=
check-cluster:
	$(MAKE) install VENV=$(RLLIB_VENV) PYTHON=$(RLLIB_PYTHON)
	$(RLLIB_PYTHON) -m pip install --quiet -e ".[rl,dev,rllib]"
	$(RLLIB_PYTHON) -m ainet_gym.checks.cluster $(if $(CLUSTER_DIR),--workdir $(CLUSTER_DIR),)

# Optional ns-3 cross-check (docs/fidelity.md): the extra ns3 (ns-3.44's Python bindings, about 520 MB;
# cppyy compiles parts at install, so a C++ compiler must be present), in a venv of its own, .venv-ns3/
# (NS3_VENV=DIR or NS3_PYTHON=/path/to/python for another). Not part of `make check`; .ci/run runs check-ns3 last.
NS3_VENV ?= .venv-ns3
NS3_PYTHON ?= $(NS3_VENV)/bin/python
install-ns3:
	$(MAKE) install VENV=$(NS3_VENV) PYTHON=$(NS3_PYTHON)
	$(NS3_PYTHON) -m pip install --quiet -e ".[rl,dev,ns3]"

# The cross-check's tests with ns-3 (the smallest case runs in ns-3).
check-ns3: install-ns3
	$(NS3_PYTHON) -m pytest -q tests/checks/test_crosscheck.py

# The calibration table of docs/fidelity.md: every case under ecmp, spray, lp and a PPO policy trained on the
# case (8192 steps, 25-120 s each; trained once into crosscheck-ppo/), fluid vs ns-3.
XC_CASES ?= xc-switch-4 xc-ring-8 xc-hd-8 xc-perm-8 xc-perm-64 xc-two-jobs
crosscheck: install-ns3
	@for c in $(XC_CASES); do test -f crosscheck-ppo/$$c.zip || $(NS3_PYTHON) -m ainet_gym.cli train \
		scenarios/crosscheck/$$c.yaml --algo ppo --timesteps 8192 --n-envs 8 --seed 0 \
		--out crosscheck-ppo/$$c.zip --logdir crosscheck-ppo/runs --no-progress || exit 1; done
	$(NS3_PYTHON) -c "import sys; from ainet_gym.checks.crosscheck import main; sys.exit(main())" --out crosscheck-results.json
