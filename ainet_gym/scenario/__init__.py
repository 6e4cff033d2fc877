"""Scenarios: the frozen spec types (:mod:`.spec`) and the YAML/dict loader that validates them (:mod:`.loader`).

``ainet_gym.scenario.load_scenario`` etc. keep working: the loader's public names are re-exported here.
"""

from ainet_gym.scenario.loader import *  # noqa: F403
from ainet_gym.scenario.loader import __all__  # noqa: F401
