"""``python -m ainet_gym.cli``: the ``ainet-gym`` command."""

import sys

from ainet_gym.cli import main

if __name__ == "__main__":  # importing this module (a doctest walk) runs nothing
    sys.exit(main())
