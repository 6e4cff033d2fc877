"""``python -m ainet_gym.checks.crosscheck``: the calibration or learning table (:func:`.report.main`)."""

from ainet_gym.checks.crosscheck.report import main

if __name__ == "__main__":  # importing this module (a doctest walk) runs nothing
    raise SystemExit(main())
