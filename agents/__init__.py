"""Agents for ainet-gym: heuristic baselines, stable-baselines3 training and evaluation."""
