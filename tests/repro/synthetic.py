"""Synthetic run tables shared by the repro tests."""

from __future__ import annotations

import pandas as pd


def c7_runs(gain, *, ent_shift=lambda seed: 0.0, kl_shift=lambda seed: 0.0, algos=("ppo", "dapo", "grpo", "dr_grpo"),
             seeds=4, sweep_seeds=4):
    """Runs of the main and sweep studies (the CPU profile's layout): ``gain(algo, seed)`` = Top-p 0.9 (and, for
    GRPO, the top-p sweep's 0.6) minus no filter; ``ent_shift(seed)`` / ``kl_shift(seed)`` = a sweep run minus its
    base (main GRPO no filter, entropy 0.001, KL 0) at the same seed."""
    def run(study, algo, seed, success, *, value=1.0, ent=0.001, kl=0.0, swept=""):
        tag = "none" if value >= 1 else f"topp{value:g}".replace(".", "p")
        rid = f"frozenlake__{algo}__{tag}__{study}{swept:g}__s{seed}".replace(".", "p") if swept != "" else \
            f"frozenlake__{algo}__{tag}__{study}__s{seed}"
        return {"run_id": rid, "study": study, "env": "frozenlake",
                "algo": algo, "seed": seed, "condition": "none" if value >= 1 else "top_p", "trainer.steps": 30,
                "trainer.entropy_coef": ent, "trainer.entropy_scope": "all", "trainer.kl_coef": kl,
                "filter.strategy": "top_p", "filter.value": value, "filter.top_p_mode": "linear",
                "filter.include_zero": value >= 1, "env.kwargs.success_rate": 0.98, "final_success": success}

    rows = []
    for algo in algos:
        for seed in range(seeds):
            base = 0.6 + 0.02 * seed + 0.01 * len(algo)
            rows += [run("main", algo, seed, base), run("main", algo, seed, base + gain(algo, seed), value=0.9)]
            if algo == "grpo" and seed < sweep_seeds:
                rows.append(run("toppsweep", algo, seed, base + gain(algo, seed), value=0.6))
                rows += [run("ent", algo, seed, base + ent_shift(seed), ent=e, swept=e) for e in (0.0, 0.05)]
                rows += [run("kl", algo, seed, base + kl_shift(seed), kl=k, swept=k) for k in (0.01, 0.1)]
    return pd.DataFrame(rows)
