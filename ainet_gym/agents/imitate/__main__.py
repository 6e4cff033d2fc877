"""``python -m ainet_gym.agents.imitate``: the command line (:func:`.cli.main`)."""

from ainet_gym.agents.imitate.cli import main

if __name__ == "__main__":  # importing this module (a doctest walk) runs nothing
    raise SystemExit(main())
