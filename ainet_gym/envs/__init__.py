"""The RL environments: the Gymnasium env and its shared core (:mod:`.env`), the native vector env
(:mod:`.vector_env`), the SB3 ``VecEnv`` adapter (:mod:`.sb3_vec_env`), rewards, rendering, the
registration of the ``ainet_gym/`` ids, compiled action decoding (:mod:`ainet_gym.sim.backends.numba.env_passes`), and the optional
per-switch PettingZoo env (:mod:`.multiagent`) and RLlib glue (:mod:`.rllib`), imported only when used."""
