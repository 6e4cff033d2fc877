"""Scenarios: the frozen spec types (:mod:`.spec`), the YAML/dict loader that validates them
(:mod:`.loader`, with :mod:`.sections`, :mod:`.rules`, :mod:`.feasibility`, :mod:`.estimate` and
:mod:`.files`; a graph fabric through the readers the fabric room registers in :mod:`.graphs`), the
MoE family (:mod:`.moe`) and a collective's phases of transfers (:mod:`.collectives`).

The room's public API, also at the top level of ``ainet_gym``: :func:`load_scenario`,
:class:`ScenarioError`, :func:`list_scenarios`, :func:`scenarios_dir`.
"""

from ainet_gym.scenario.loader import ScenarioError, list_scenarios, load_scenario, scenarios_dir

__all__ = ["ScenarioError", "list_scenarios", "load_scenario", "scenarios_dir"]
