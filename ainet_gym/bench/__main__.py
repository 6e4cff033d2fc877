"""``python -m ainet_gym.bench [--quick] [--out DIR] [--sections LIST] [--no-progress]``."""

import sys

from ainet_gym.bench import main

if __name__ == "__main__":  # importing this module (a doctest walk) runs nothing
    sys.exit(main())
