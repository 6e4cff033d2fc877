"""The fabric: topologies built with networkx (spine-leaf, fat-tree, rail-optimised, your own graph) into
a link table, and the candidate (ECMP) paths of every host pair. :mod:`.topology` is the public API; the
modules behind it hold one concern each (its docstring lists them)."""
