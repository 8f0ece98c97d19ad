"""The paper's reproduction layer: profiles and the DVC pipeline, reading runs, statistics, verdicts, figures.

The core library (environments, rollouts, trainer, filter, diagnostics) never imports this package
(``tests/test_layers.py`` checks it); the notebooks in ``notebooks/`` and ``dvc.yaml`` use it.

Pipeline: :mod:`~ragen2.repro.profiles` (the study grids, ``params.yaml``), :mod:`~ragen2.repro.run_ids`,
:mod:`~ragen2.repro.runqueue` (training many runs), :mod:`~ragen2.repro.dvcstages` (recording them in
``dvc.lock``), :mod:`~ragen2.repro.notebook_stages` (what the notebook stages run and depend on).
Data: :mod:`~ragen2.repro.runs` (run directories as DataFrames), :mod:`~ragen2.repro.studies`,
:mod:`~ragen2.repro.prompt_tables`, :mod:`~ragen2.repro.regimes`. Statistics and verdicts:
:mod:`~ragen2.repro.stats`, :mod:`~ragen2.repro.claim_tests`, :mod:`~ragen2.repro.verdicts`,
:mod:`~ragen2.repro.claims`. Output: :mod:`~ragen2.repro.tables`, :mod:`~ragen2.repro.figure_style`,
:mod:`~ragen2.repro.figures`, :mod:`~ragen2.repro.artifacts`.

Importing this package pins the math kernels (:func:`ragen2.kernels.pin`) unless torch is imported already:
every stage, notebook kernel and command of the reproduction gets the kernels the committed results were made
with (``RAGEN2_KERNELS=native`` opts out).
"""

import sys as _sys

from ragen2 import kernels as _kernels

if "torch" not in _sys.modules:
    _kernels.pin()
