"""Hyperparameter sweeps: Optuna chooses configurations; each trial trains k seeds of one."""
