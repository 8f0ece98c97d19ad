"""The RL trainer (docs/method.md §0, §4.5-§4.8, §6).

- :mod:`~ragen2.trainer.loop`: ``train(cfg, run_dir)``, the step loop, run-dir records;
- :mod:`~ragen2.trainer.advantages`: GAE, whitening, group-normalised advantages;
- :mod:`~ragen2.trainer.losses`: log-probs/entropy, clipped policy loss, KL estimators, value loss,
  aggregation modes;
- :mod:`~ragen2.trainer.algos`: the ``ppo`` / ``grpo`` / ``dapo`` / ``dr_grpo`` presets;
- :mod:`~ragen2.trainer.actor`, :mod:`~ragen2.trainer.critic`: forward passes and updates;
- :mod:`~ragen2.trainer.precision` (float32 masters, autocast, fp16 loss scaling); the optimiser step, the ragged
  forward and activation checkpointing are model-level pieces the warm start and rollouts share (:mod:`ragen2.model`);
- :mod:`~ragen2.trainer.batch`: padded training tensors; :mod:`~ragen2.trainer.update_data`: a step's update batch
  with its targets; :mod:`~ragen2.trainer.models`: actor, reference and critic; :mod:`~ragen2.trainer.seeds`: the
  run's random streams;
- :mod:`~ragen2.trainer.grad_analysis`: RV-bucketed gradient norms (docs/method.md §6.5);
- :mod:`~ragen2.trainer.early_stop`, :mod:`~ragen2.trainer.checkpoint`, :mod:`~ragen2.trainer.runlog`.

Submodules are imported explicitly (``from ragen2.trainer.loop import train``) so that the pure
tensor helpers load without transformers.
"""
