"""Model-level pieces that rollouts, MI scoring, the trainer and the warm start share.

- :mod:`~ragen2.model.prefix`: the ragged forward (each distinct prompt once, each row up to its last wanted
  position) and the checks of which models it serves;
- :mod:`~ragen2.model.activation_checkpointing`: recomputing decoder layers in the backward pass;
- :mod:`~ragen2.model.optim`: AdamW on float32 master weights, gradient clipping, the optimiser step.

They know models and tensors, not runs: nothing here imports the trainer, rollouts or metrics, which all import
from here.
"""
