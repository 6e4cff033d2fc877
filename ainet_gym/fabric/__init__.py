"""The fabric: topologies built with networkx (spine-leaf, fat-tree, rail-optimised, your own graph) into
a link table, and the candidate (ECMP) paths of every host pair. :mod:`.topology` is the public API; the
modules behind it hold one concern each (its docstring lists them).

Importing the room registers its readers of a graph fabric with the scenario loader
(:func:`ainet_gym.scenario.graphs.register_graph_fabrics`): the loader checks a ``topology: graph`` fabric
by building it, and the fabric comes after the scenario in the pipeline."""


def _register_graph_fabrics() -> None:
    """Give the scenario loader the fabric room's readers of a graph fabric."""
    from ainet_gym.fabric.build import build_fabric
    from ainet_gym.fabric.graph_input import graph_spec
    from ainet_gym.fabric.graph_io import read_fabric_graph
    from ainet_gym.fabric.graph_size import check_graph_size
    from ainet_gym.scenario.graphs import GraphFabrics, register_graph_fabrics

    register_graph_fabrics(
        GraphFabrics(read=read_fabric_graph, spec=graph_spec, check_size=check_graph_size, build=build_fabric)
    )


_register_graph_fabrics()
