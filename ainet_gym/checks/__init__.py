"""Checks of the model against itself and against others: backend parity (:mod:`.parity`), a soak of
random and malformed inputs (:mod:`.soak`), and the ns-3 cross-check (:mod:`.crosscheck`, the ``ns3``
extra, imported only when run)."""
