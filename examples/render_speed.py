"""Time ``render_mode="rgb_array"`` on the default scenario of every base env id (milliseconds a frame).

    python examples/render_speed.py [--frames 20] [--steps 4]

Each env runs ``--steps`` random steps (so the heat map has history), then renders ``--frames`` frames;
the table gives the first frame (which draws the static labels once per layout) and the median and
maximum of the others. The target of the project is under 50 ms a frame.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import ainet_gym
from ainet_gym.envs.registration import ENV_IDS


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=20, help="frames timed per env id")
    ap.add_argument("--steps", type=int, default=4, help="random steps before rendering")
    args = ap.parse_args()
    print(f"ainet-gym {ainet_gym.__version__}: rgb_array, ms a frame ({args.frames} frames per id)")
    print(f"{'env id':<36}{'scenario':<28}{'first':>8}{'median':>8}{'max':>8}")
    worst = 0.0
    for env_id, scenario in ENV_IDS.items():
        env = gym.make(env_id, render_mode="rgb_array")
        env.reset(seed=0)
        env.action_space.seed(0)
        for _ in range(args.steps):
            env.step(env.action_space.sample())
        ms = []
        for _ in range(args.frames):
            t0 = time.perf_counter()
            img = env.render()
            ms.append((time.perf_counter() - t0) * 1e3)
        assert img.dtype == np.uint8 and img.ndim == 3
        rest = ms[1:] or ms
        worst = max(worst, float(np.median(rest)))
        print(f"{env_id:<36}{scenario:<28}{ms[0]:>8.1f}{np.median(rest):>8.1f}{max(rest):>8.1f}")
        env.close()
    print(f"largest median: {worst:.1f} ms ({'under' if worst < 50 else 'OVER'} 50 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
