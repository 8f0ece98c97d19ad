"""Bridges from ragen2 to other training stacks.

- :mod:`ragen2.integrations.trl`: SNR-aware group filtering and MI diagnostics for TRL's
  ``GRPOTrainer`` (``SNRFilterGRPOTrainer``), and a ``rollout_func`` that plays ragen2
  environments multi-turn inside TRL (``make_env_rollout_func``, ``make_env_dataset``,
  ``env_reward_func``). Importing it imports ``trl``; nothing here is imported eagerly.
"""
