"""Unit conversions used across the package (one copy of each constant).

Names carry their unit: ``*_gbps`` is gigabits per second (scenario files, outputs), ``*_bytes_per_s`` is
bytes per second (the engine), ``*_bytes_per_interval`` is bytes per decision interval, ``*_ms`` and
``*_s`` are milliseconds and seconds.

>>> 400 * GBPS_TO_BYTES_PER_S
50000000000.0
>>> 50e9 * BYTES_PER_S_TO_GBPS
400.0
"""

#: Gbit/s -> bytes/s.
GBPS_TO_BYTES_PER_S = 1e9 / 8.0
#: bytes/s -> Gbit/s.
BYTES_PER_S_TO_GBPS = 8e-9
