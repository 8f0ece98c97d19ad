"""Analysis helpers the notebooks call: study selection, per-claim tables and verdicts, prompt-level tables.

Everything a notebook needs beyond loading runs (:mod:`ragen2.results_io`), drawing
(:mod:`ragen2.figures`) and testing (:mod:`ragen2.stats`) lives here, so notebooks stay thin.

- Run ids (:mod:`ragen2.profiles`): :func:`parse_run_id`, :func:`load_study` (runs of some studies,
  with ``study``, ``study_value`` and ``filter_tag`` columns).
- Verdicts: :func:`paired_claim` (a paired comparison over seeds -> :class:`ragen2.claims.Claim`),
  :func:`correlation_table` (C2), :func:`grad_claim` (C4), :func:`sweep_table` and
  :func:`intervention_claim` (C7), :func:`trend_claim` (C6: a metric rises/falls over training).
- Prompt level (C3, C6 heatmaps): :func:`prompt_level_table` rolls a saved policy out on fixed
  prompts and returns one row per (prompt, rollout) with the reward, the prompt's RV and a per-prompt
  MI proxy; :func:`rv_quartile_table` cuts prompts into RV quartiles.
- Toy regimes (notebook 01): :func:`toy_point`, :func:`regime_points_from_steps`, :func:`show_toy_policy`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragen2.claims import Claim
from ragen2.results_io import final_values, load_runs, start_end_values
from ragen2.stats import decide, paired_test, spearman

_RUN_ID_RE = re.compile(r"^(?P<env>[^_]+(?:_[^_]+)*)__(?P<algo>[a-z_]+)__(?P<filter>[a-z0-9p]+)__"
                        r"(?P<study>[a-z]+)(?P<value>[0-9p]*)__s(?P<seed>\d+)$")
MI_METRIC = "collapse_first_turn/mi_estimate"
"""The per-token MI proxy used as "the MI" in verdicts (the probe's MI_tok)."""
SMALLEST_EFFECTS = {
    "C3_success": 0.05,
    "C3_mi": 0.05,
    "C5": 0.02,
    "C6_mi": 0.1,
    "C6_zero_variance": 0.5,
    "C7_rho": -0.3,
}
"""Smallest effects that would count as the paper's, for claims where the paper gives no number, fixed
before the CPU runs were looked at. A verdict is ``disagree`` when the 95 % interval of our effect excludes
it (our data rule out an effect that large) even though no significant effect was found either way:
C3, top minus bottom RV quartile, 5 points of success and 0.05 nats of per-token MI; C5, the filter's gain
at partial slip minus its gain at the extremes, 2 points (the paper's FrozenLake gains span 0.6-10.9);
C6, Top-p minus none in final per-token MI, 0.1 nats (a third of the CPU probe's +0.34), and a rise of
0.5 zero-variance groups per batch (mean of the last 5 steps minus the first 5); C7, a Spearman rho of -0.3 between the
top-p value and final success. Where the paper gives a number (C1: its mean FrozenLake gain over the
algorithms run; C2: its rho of +0.39 for MI-ZScore), that number is used instead."""


# ---------------------------------------------------------------------------------------------
# Run ids and studies
# ---------------------------------------------------------------------------------------------
def parse_run_id(run_id: str) -> dict[str, Any]:
    """The parts of ``<env>__<algo>__<filter>__<study><value>__s<seed>``.

    Returns:
        ``env, algo, filter_tag, study, study_value (float or NaN), seed``.

    Raises:
        ValueError: the id does not have that shape.
    """
    m = _RUN_ID_RE.match(run_id)
    if m is None:
        raise ValueError(f"run id {run_id!r} is not of the form <env>__<algo>__<filter>__<study>__s<seed>")
    value = m["value"]
    return {"env": m["env"], "algo": m["algo"], "filter_tag": m["filter"], "study": m["study"],
            "study_value": float(value.replace("p", ".")) if value else math.nan, "seed": int(m["seed"])}


def load_study(runs_root: str | Path, studies: str | Sequence[str],
               metrics: Sequence[str] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Runs (and their steps) of the given studies, with the run-id parts as columns.

    Args:
        runs_root: folder of run directories.
        studies: study tag(s) without value (``main``, ``slip``, ``mech``, ``ent``, ...).
        metrics: per-step metrics whose final value is added to ``runs`` as columns.

    Raises:
        FileNotFoundError: no run of these studies.
    """
    wanted = {studies} if isinstance(studies, str) else set(studies)
    runs, steps = load_runs(runs_root)
    parts = pd.DataFrame([parse_run_id(r) for r in runs["run_id"]])
    runs = runs.assign(study=parts["study"].to_numpy(), study_value=parts["study_value"].to_numpy(),
                       filter_tag=parts["filter_tag"].to_numpy())
    runs = runs[runs["study"].isin(wanted)].reset_index(drop=True)
    if runs.empty:
        raise FileNotFoundError(f"no run of study {sorted(wanted)} under {str(runs_root)!r}")
    steps = steps[steps["run_id"].isin(set(runs["run_id"]))].reset_index(drop=True)
    steps = steps.merge(runs[["run_id", "study", "study_value", "filter_tag"]], on="run_id")
    if metrics:
        runs = runs.merge(final_values(steps, list(metrics)), on="run_id", how="left")
    return runs, steps


# ---------------------------------------------------------------------------------------------
# Verdicts
# ---------------------------------------------------------------------------------------------
def paired_claim(claim: str, runs: pd.DataFrame, value: str, a: str, b: str, *, direction: str = "greater",
                 condition: str = "condition", pair_on: str | Sequence[str] = "seed", what: str = "",
                 scale: float = 1.0, paper_effect: float | None = None) -> Claim:
    """A claim judged by a paired test of ``value`` under condition ``a`` vs ``b``.

    Pairs are rows that agree on ``pair_on`` (one or several columns, e.g. ``("env", "algo",
    "seed")``). The verdict is :meth:`ragen2.stats.PairedResult.verdict` (paired t-test of ``a - b``;
    ``disagree`` also when the t-CI excludes ``paper_effect``, the smallest difference that would
    count as the paper's effect); with fewer than 2 pairs it is ``inconclusive``.
    """
    keys = [pair_on] if isinstance(pair_on, str) else list(pair_on)
    data = runs.dropna(subset=[value])
    sides = [data[data[condition] == c].set_index(keys)[value].rename(c) for c in (a, b)]
    joined = pd.concat(sides, axis=1, join="inner").dropna()
    label = f"{what}: " if what else ""
    if len(joined) < 2:
        return Claim(claim, "inconclusive", f"{label}{len(joined)} pair(s) of {a} vs {b} on {value}; too few")
    result = paired_test(joined[a].to_numpy(), joined[b].to_numpy())
    verdict = result.verdict(direction, paper_effect)
    return Claim(claim, verdict, f"{label}{value} {a} - {b}: {result.summary(scale=scale)}{_paper_text(paper_effect, scale)}")


def _paper_text(paper_effect: float | None, scale: float = 1.0) -> str:
    return f"; paper's effect {paper_effect * scale:+.3g}" if paper_effect is not None else ""


def trend_claim(claim: str, steps: pd.DataFrame, metric: str, *, direction: str, what: str = "",
                paper_effect: float | None = None, window: int = 1) -> Claim:
    """Does ``metric`` rise (``greater``) or fall (``less``) over training in each run?

    Per run: the mean of its last ``window`` logged values minus the mean of its first ``window``
    (a window of several steps for noisy per-step counts); a paired t-test over runs.
    """
    ends = start_end_values(steps, metric, window)
    label = f"{what}: " if what else ""
    if len(ends) < 2:
        return Claim(claim, "inconclusive", f"{label}{metric} logged at {2 * window}+ steps in {len(ends)} run(s); "
                                            "too few")
    result = paired_test(ends["last"].to_numpy(), ends["first"].to_numpy())
    verdict = result.verdict(direction, paper_effect)
    span = f"mean of the last {window} - first {window} steps" if window > 1 else "last - first"
    return Claim(claim, verdict, f"{label}{metric} {span} over {len(ends)} runs: "
                                 f"{result.summary().replace(' pairs', ' runs')}{_paper_text(paper_effect)}")


def combine(claim: str, parts: Sequence[Claim]) -> Claim:
    """One verdict from several sub-tests of a claim: all agree -> agree, any disagree -> disagree."""
    verdicts = {p.verdict for p in parts}
    verdict = "agree" if verdicts == {"agree"} else "disagree" if "disagree" in verdicts else "inconclusive"
    return Claim(claim, verdict, "; ".join(p.evidence for p in parts))


def with_context(primary: Claim, *context: Claim) -> Claim:
    """``primary``'s verdict with the evidence of secondary tests appended (they inform, not decide)."""
    extra = "; ".join(f"(context) {c.evidence}" for c in context)
    return Claim(primary.claim, primary.verdict, primary.evidence + (f"; {extra}" if extra else ""))


def gain_by_value(runs: pd.DataFrame, value_col: str, metric: str = "final_success", a: str = "top_p",
                  b: str = "none") -> pd.DataFrame:
    """Per ``value_col`` (e.g. slip rate): mean of ``a``, of ``b``, and the paired gain ``a - b`` over seeds."""
    rows = []
    for value, part in runs.groupby(value_col):
        pair = part.pivot_table(index="seed", columns="condition", values=metric)
        has = a in pair.columns and b in pair.columns
        gain = (pair[a] - pair[b]).dropna() if has else pd.Series(dtype=float)
        rows.append({value_col: value, f"{a}_mean": pair[a].mean() if a in pair.columns else math.nan,
                     f"{b}_mean": pair[b].mean() if b in pair.columns else math.nan,
                     "gain_mean": gain.mean() if len(gain) else math.nan,
                     "gain_std": gain.std(ddof=1) if len(gain) > 1 else math.nan, "n_pairs": len(gain)})
    return pd.DataFrame(rows)


def stochasticity_claim(claim: str, runs: pd.DataFrame, value_col: str = "slip_rate",
                        mid: tuple[float, float] = (0.05, 0.5), a: str = "top_p", b: str = "none",
                        paper_effect: float | None = None) -> Claim:
    """C5: the filter's gain is larger at partial stochasticity than at the extremes.

    Per seed: mean gain ``a - b`` over slip rates in ``[mid[0], mid[1]]`` minus the mean gain over
    the other slip rates; a paired test over seeds of that difference (direction greater).
    """
    wide = runs.pivot_table(index=["seed", value_col], columns="condition", values="final_success")
    if a not in wide.columns or b not in wide.columns:
        return Claim(claim, "inconclusive", f"conditions {a!r} and {b!r} are not both present")
    gain = (wide[a] - wide[b]).dropna().rename("gain").reset_index()
    is_mid = gain[value_col].between(*mid)
    per_seed = pd.DataFrame({"mid": gain[is_mid].groupby("seed")["gain"].mean(),
                             "ends": gain[~is_mid].groupby("seed")["gain"].mean()}).dropna()
    if len(per_seed) < 2:
        return Claim(claim, "inconclusive", f"{len(per_seed)} seed(s) with both mid and extreme slip rates; too few")
    res = paired_test(per_seed["mid"].to_numpy(), per_seed["ends"].to_numpy())
    return Claim(claim, res.verdict("greater", paper_effect),
                 f"gain({a} - {b}) at slip in [{mid[0]:g}, {mid[1]:g}] minus gain elsewhere: {res.summary()}"
                 f"{_paper_text(paper_effect)}")


def correlation_table(runs: pd.DataFrame, metrics: dict[str, str], target: str = "final_success",
                      paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """Spearman rho of each metric column vs ``target`` across runs (NaNs dropped per metric).

    Returns:
        ``metric, label, rho, ci_low, ci_high, p, n`` (+ ``paper_rho`` when ``paper`` is given);
        metrics with fewer than 3 finite runs get NaN.
    """
    lookup = {} if paper is None else dict(zip(paper["metric"], paper["paper_rho"]))
    rows = []
    for col, label in metrics.items():
        row = {"metric": col, "label": label, "rho": math.nan, "ci_low": math.nan, "ci_high": math.nan,
               "p": math.nan, "n": 0}
        if col in runs.columns:
            ok = runs[[col, target]].replace([np.inf, -np.inf], np.nan).dropna()
            row["n"] = len(ok)
            if len(ok) >= 3:
                r = spearman(ok[col].to_numpy(), ok[target].to_numpy())
                row.update(rho=r.rho, ci_low=r.ci_low, ci_high=r.ci_high, p=r.p)
        if lookup:
            row["paper_rho"] = lookup.get(col.rsplit("/", 1)[-1], math.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def correlation_claim(claim: str, corr: pd.DataFrame, mi_metric: str, entropy_metrics: Sequence[str]) -> Claim:
    """C2: the MI proxy correlates positively with success (significant), and better than entropies.

    ``agree`` = rho(MI) significantly > 0 and larger than every entropy metric's |rho|; ``disagree`` =
    rho(MI) significantly < 0, or below an entropy metric with a significant correlation, or (when
    ``corr`` has the paper's values) a 95 % bootstrap CI of rho(MI) that lies below the paper's rho
    (our runs rule out a correlation as strong as the paper's).
    """
    table = corr.set_index("metric")
    mi = table.loc[mi_metric]
    paper_rho = float(mi["paper_rho"]) if "paper_rho" in table.columns and not pd.isna(mi["paper_rho"]) else None
    base = decide(float(mi["rho"]), float(mi["p"]), "greater", ci=(float(mi["ci_low"]), float(mi["ci_high"])),
                  paper_effect=paper_rho)
    ents = table.loc[[m for m in entropy_metrics if m in table.index]]
    better = bool((mi["rho"] > ents["rho"].abs()).all()) if len(ents) else False
    beaten = bool(((ents["p"] < 0.05) & (ents["rho"].abs() > mi["rho"])).any()) if len(ents) else False
    verdict = base
    if base == "agree" and not better:
        verdict = "inconclusive"
    if beaten:
        verdict = "disagree"
    text = ", ".join(f"{r.label} rho {r.rho:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}] (p={r.p:.2g}, n={r.n})"
                     for r in corr.itertuples())
    paper = f"; paper: {mi_metric.rsplit('/', 1)[-1]} rho {paper_rho:+.2f}" if paper_rho is not None else ""
    return Claim(claim, verdict, f"Spearman vs final success (95% bootstrap CIs): {text}{paper}")


def grad_claim(claim: str, grad: pd.DataFrame) -> Claim:
    """C4: the task-gradient norm grows with bucket RV while the regularisation norm does not.

    Spearman of ``task_norm`` and of ``reg_norm`` vs ``rv_mean`` over every (run, step, bucket) row
    except the ``all`` bucket. ``agree`` when the task rho is significantly positive and the reg rho
    is not (significantly positive); ``disagree`` when the task rho is significantly negative.
    """
    data = grad[grad["bucket"].astype(str) != "all"].dropna(subset=["rv_mean", "task_norm", "reg_norm"])
    if len(data) < 3:
        return Claim(claim, "inconclusive", f"{len(data)} bucket rows; too few")
    task = spearman(data["rv_mean"], data["task_norm"])
    reg = spearman(data["rv_mean"], data["reg_norm"]) if data["reg_norm"].nunique() > 1 else None
    verdict = decide(task.rho, task.p, "greater")
    reg_grows = reg is not None and decide(reg.rho, reg.p, "greater") == "agree"
    if verdict == "agree" and reg_grows:
        verdict = "inconclusive"
    reg_text = reg.summary().replace(" runs", " bucket rows") if reg is not None else "constant (coefficients 0?)"
    algos = ",".join(sorted(map(str, data["algo"].unique()))) if "algo" in data.columns else "?"
    task_text = task.summary().replace(" runs", " bucket rows")
    return Claim(claim, verdict, f"{algos}: task norm vs RV {task_text}; reg norm vs RV {reg_text}")


SWEPT_COLUMNS = {"ent": "trainer.entropy_coef", "kl": "trainer.kl_coef", "toppsweep": "filter.value"}
"""The config column each intervention sweep changes."""
SETTING_COLUMNS = ("env", "algo", "trainer.steps", "trainer.entropy_coef", "trainer.entropy_scope", "trainer.kl_coef",
                   "filter.strategy", "filter.value", "filter.top_p_mode", "filter.include_zero", "env.kwargs.success_rate")
"""Config columns that must agree for a run of another study to stand in as a sweep or slip point."""


def _setting_keys(frame: pd.DataFrame, ignore: Sequence[str]) -> list[tuple]:
    cols = [c for c in SETTING_COLUMNS if c not in ignore]
    for col in cols:
        if col not in frame.columns:
            frame = frame.assign(**{col: math.nan})
    return [tuple(map(str, row)) for row in frame[cols].to_numpy()]


def borrowed_points(study_runs: pd.DataFrame, candidates: pd.DataFrame, ignore: Sequence[str]) -> pd.DataFrame:
    """Rows of ``candidates`` whose settings equal those of some run in ``study_runs`` except the ``ignore``
    columns (the swept ones): a profile with ``reuse_main`` trains such points once, in the main study.

    Both tables come from :func:`load_study`; seeds are not compared.
    """
    wanted = set(_setting_keys(study_runs, ignore))
    mask = [k in wanted for k in _setting_keys(candidates, ignore)]
    return candidates[mask]


def slip_runs(runs_root: str | Path, metrics: Sequence[str] = ()) -> pd.DataFrame:
    """C5's runs with ``slip_rate`` = 1 - FrozenLake's ``success_rate``.

    The main study's runs with the same algorithm, filter and trainer settings as some slip run (at
    any slip rate) are added as their own slip rate (FrozenLake's base 2 %), unless the slip study
    has runs at that rate and seed itself.
    """
    slip, _ = load_study(runs_root, "slip", metrics=metrics)
    try:
        main, _ = load_study(runs_root, "main", metrics=metrics)
    except FileNotFoundError:
        main = slip.iloc[0:0]
    borrowed = borrowed_points(slip, main, ignore=("env.kwargs.success_rate",))
    out = pd.concat([slip, borrowed], ignore_index=True)
    out["slip_rate"] = (1.0 - out["env.kwargs.success_rate"].astype(float)).round(6)
    return out.drop_duplicates(subset=["slip_rate", "condition", "seed", "algo"], keep="first").reset_index(drop=True)


def sweep_table(runs: pd.DataFrame, sweeps: dict[str, str], mi_metric: str = MI_METRIC,
                base: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per run of the intervention sweeps: ``sweep, value, seed, run_id, final_success, final_mi``.

    Args:
        runs: from :func:`load_study` with the final ``mi_metric`` column.
        sweeps: study tag -> sweep label (``{"ent": "entropy coef", "kl": "KL coef", "toppsweep": "top-p"}``).
            The value is read from the config column the sweep changes (:data:`SWEPT_COLUMNS`; top-p 1.0
            = no filter).
        base: optional runs of another study (the main one) that are points of a sweep: those whose
            settings equal a sweep run's except the swept column (and, for top-p, ``include_zero``).
    """
    rows = []
    for study, label in sweeps.items():
        column = SWEPT_COLUMNS[study]
        part = runs[runs["study"] == study]
        if base is not None and len(part):
            ignore = (column, "filter.include_zero") if study == "toppsweep" else (column,)
            part = pd.concat([part, borrowed_points(part, base, ignore)], ignore_index=True)
        for d in part.to_dict("records"):
            rows.append({"sweep": label, "value": float(d[column]), "seed": d["seed"], "run_id": d["run_id"],
                         "final_success": d["final_success"], "final_mi": d.get(mi_metric, math.nan)})
    if not rows:
        raise ValueError(f"no runs of the sweeps {sorted(sweeps)}")
    return pd.DataFrame(rows).drop_duplicates(subset=["sweep", "run_id"]).reset_index(drop=True)


def intervention_claim(claim: str, table: pd.DataFrame, filter_sweep: str, other_sweeps: Sequence[str],
                       paper_rho: float | None = None) -> Claim:
    """C7: the top-p sweep moves success consistently (lower top-p -> higher success), the others do not.

    Spearman of the swept value vs final success per sweep. ``agree`` when the filter sweep's rho is
    significantly negative and no other sweep's is significant; ``disagree`` when the filter sweep
    is significantly positive, or is not significant while another sweep is, or (with ``paper_rho``, a
    negative rho) when its 95 % bootstrap CI lies above ``paper_rho`` (we rule out a relation that strong).
    """
    results = {}
    for name, part in table.groupby("sweep"):
        ok = part.dropna(subset=["final_success"])
        results[name] = spearman(ok["value"], ok["final_success"]) if len(ok) >= 3 else None
    main = results.get(filter_sweep)
    if main is None:
        return Claim(claim, "inconclusive", f"sweep {filter_sweep!r} has fewer than 3 runs")
    verdict = decide(main.rho, main.p, "less", ci=(main.ci_low, main.ci_high), paper_effect=paper_rho)
    others_sig = [n for n in other_sweeps if results.get(n) is not None and results[n].p < 0.05]
    if verdict == "agree" and others_sig:
        verdict = "inconclusive"
    if verdict == "inconclusive" and others_sig and not main.p < 0.05:
        verdict = "disagree"
    text = "; ".join(f"{n}: {r.summary()}" if r is not None else f"{n}: <3 runs" for n, r in results.items())
    bar = f"; smallest effect of interest: rho {paper_rho:+.2f} for {filter_sweep}" if paper_rho is not None else ""
    return Claim(claim, verdict, f"swept value vs final success, {text}{bar}")


# ---------------------------------------------------------------------------------------------
# Prompt-level tables (C3, C6)
# ---------------------------------------------------------------------------------------------
def prompt_level_table(run_dir: str | Path, *, phase: str = "end", num_prompts: int = 32, group_size: int = 8,
                       cache_dir: str | Path = "data/cache", seed: int = 0, first_seed: int = 900_000
                       ) -> pd.DataFrame:
    """Roll a run's policy out on fixed prompts and score each prompt: reward, RV, a per-prompt MI proxy.

    Args:
        run_dir: a run directory (``config.json``, ``checkpoints/``).
        phase: ``start`` = the policy RL started from (the warm start), ``end`` = the latest checkpoint.
        num_prompts, group_size: prompts (env seeds ``first_seed + i``) x rollouts each.
        cache_dir: the warm-start cache.
        seed: sampling seed (the same for every run and phase, so prompts and noise are shared).

    Returns:
        One row per (prompt, rollout): ``prompt, rollout, reward, success, rv`` (population variance of
        the prompt's rewards), ``mi`` (mean over the prompt's first-turn reasonings of
        ``log p(z|x) - log mean_j p(z|x_j)`` per token: how much better the own prompt explains the
        reasoning than the average prompt) and ``phase``.
    """
    import json

    import torch

    from ragen2.config import RunConfig, from_dict
    from ragen2.metrics.scoring import cross_logprobs
    from ragen2.policy import load_policy
    from ragen2.rollout.collect import collect_rollouts
    from ragen2.trainer.checkpoint import latest_checkpoint, load_checkpoint
    from ragen2.trainer.pipeline import initial_policy_path

    if phase not in ("start", "end"):
        raise ValueError(f"phase must be 'start' or 'end', got {phase!r}")
    if num_prompts < 2 or group_size < 1:
        raise ValueError(f"need num_prompts >= 2 and group_size >= 1, got {num_prompts}, {group_size}")
    run_dir = Path(run_dir)
    cfg = from_dict(RunConfig, json.loads((run_dir / "config.json").read_text()))
    model, tokenizer = load_policy(initial_policy_path(cfg, Path(cache_dir)), dtype=cfg.policy.dtype,
                                   device=cfg.policy.device)
    if phase == "end":
        ckpt = latest_checkpoint(run_dir)
        if ckpt is None:
            raise FileNotFoundError(f"{run_dir} has no checkpoint (trainer.save_freq 0 and unfinished?)")
        model.load_state_dict(load_checkpoint(ckpt, map_location=next(model.parameters()).device)["actor"])
    model.eval()
    seeds = [first_seed + i for i in range(num_prompts)]
    with torch.no_grad():
        batch = collect_rollouts(model, tokenizer, cfg.env, cfg.rollout, seeds, group_size=group_size,
                                 temperature=cfg.rollout.temperature, seed=seed)
        trajs = batch.trajectories
        prompts = [trajs[g * group_size].first_prompt_ids for g in range(num_prompts)]
        rows = [(i, t) for i, t in enumerate(trajs) if t.first_reasoning_ids]
        gap = np.full(len(trajs), np.nan)
        if rows:
            logp, lengths = cross_logprobs(model, tokenizer, prompts, [t.first_reasoning_ids for _, t in rows])
            per_tok = logp / np.maximum(lengths, 1)[:, None]
            marginal = np.logaddexp.reduce(per_tok, axis=1) - math.log(num_prompts)
            for k, (i, _) in enumerate(rows):
                gap[i] = per_tok[k, i // group_size] - marginal[k]
    scores = batch.scores.reshape(num_prompts, group_size)
    out = pd.DataFrame({
        "prompt": np.repeat(np.arange(num_prompts), group_size),
        "rollout": np.tile(np.arange(group_size), num_prompts),
        "reward": scores.ravel(),
        "success": batch.successes.reshape(-1).astype(float),
        "rv": np.repeat(scores.var(axis=1), group_size),
        "mi_row": gap,
    })
    out["mi"] = out.groupby("prompt")["mi_row"].transform("mean")
    return out.drop(columns="mi_row").assign(phase=phase, run_id=run_dir.name)


def prompt_tables(runs_root: str | Path, run_ids: Sequence[str], phases: Sequence[str] = ("start", "end"),
                  **kwargs: Any) -> pd.DataFrame:
    """:func:`prompt_level_table` of several runs and phases, concatenated."""
    if not len(run_ids):
        raise ValueError("run_ids is empty")
    return pd.concat([prompt_level_table(Path(runs_root) / rid, phase=phase, **kwargs)
                      for rid in run_ids for phase in phases], ignore_index=True)


def rv_quartile_table(prompts: pd.DataFrame, by: Sequence[str] = ("run_id", "phase")) -> pd.DataFrame:
    """Prompts cut into RV quartiles within each ``by`` group (1 = lowest RV; ties broken by prompt id).

    Returns:
        One row per (``by``..., quartile): ``success`` and ``mi`` means over the quartile's prompts and
        ``rv`` mean. Groups with fewer than 4 prompts are skipped.
    """
    per_prompt = prompts.groupby([*by, "prompt"], as_index=False).agg(
        success=("success", "mean"), mi=("mi", "mean"), rv=("rv", "first"))
    parts = []
    for _, part in per_prompt.groupby(list(by)):
        if len(part) < 4:
            continue
        order = part.sort_values(["rv", "prompt"], kind="stable")
        order = order.assign(quartile=(np.arange(len(order)) * 4 // len(order)) + 1)
        parts.append(order)
    if not parts:
        raise ValueError("no group has 4 or more prompts")
    table = pd.concat(parts)
    return table.groupby([*by, "quartile"], as_index=False).agg(success=("success", "mean"), mi=("mi", "mean"),
                                                                 rv=("rv", "mean"))


def quartile_differences(quartiles: pd.DataFrame, col: str) -> pd.Series:
    """Per (run, phase): ``col`` in the top RV quartile minus the bottom one (the pairs C3 is tested on)."""
    wide = quartiles.pivot_table(index=["run_id", "phase"], columns="quartile", values=col)
    if 4 not in wide.columns or 1 not in wide.columns:
        raise ValueError(f"quartiles 1 and 4 of {col!r} are not both present")
    return (wide[4] - wide[1]).dropna().rename(f"{col}_q4_minus_q1")


def quartile_claim(claim: str, quartiles: pd.DataFrame, paper_effect: dict[str, float] | None = None) -> Claim:
    """C3: success and MI higher in the top RV quartile than in the bottom one (paired over runs).

    ``paper_effect``: optional smallest effect per column (``success``, ``mi``) for the t-CI rule.
    """
    wide = quartiles.pivot_table(index=["run_id", "phase"], columns="quartile", values=["success", "mi"])
    parts = []
    for col in ("success", "mi"):
        if (col, 4) not in wide.columns or (col, 1) not in wide.columns:
            parts.append(Claim(claim, "inconclusive", f"{col}: quartiles 1 and 4 missing"))
            continue
        pair = wide[[(col, 4), (col, 1)]].dropna()
        if len(pair) < 2:
            parts.append(Claim(claim, "inconclusive", f"{col}: {len(pair)} run(s); too few"))
            continue
        res = paired_test(pair[(col, 4)].to_numpy(), pair[(col, 1)].to_numpy())
        effect = (paper_effect or {}).get(col)
        parts.append(Claim(claim, res.verdict("greater", effect),
                           f"{col} Q4 - Q1: {res.summary().replace(' pairs', ' (run, phase) pairs')}{_paper_text(effect)}"))
    return combine(claim, parts)


# ---------------------------------------------------------------------------------------------
# Toy regimes (notebook 01)
# ---------------------------------------------------------------------------------------------
def toy_point(dependence: float, diversity: int, template_size: int = 4, num_inputs: int = 8) -> dict[str, float]:
    """Exact H(Z|X), I(X;Z) and H(Z) of a :class:`ragen2.metrics.toy.MixturePolicy`."""
    from ragen2.metrics.toy import MixturePolicy

    p = MixturePolicy(num_inputs=num_inputs, dependence=dependence, diversity=diversity,
                      template_size=template_size)
    return {"cond_entropy": p.conditional_entropy(), "mi": p.mutual_information(), "entropy": p.entropy()}


def toy_estimates(rows_per_column: int = 64, seed: int = 0) -> pd.DataFrame:
    """Exact vs sampled MI / conditional entropy of the four toy regimes (:data:`ragen2.metrics.toy.REGIMES`).

    The sampled values are :func:`ragen2.metrics.mi_proxies` (``mi_seq_estimate``,
    ``conditional_entropy_seq_est``) on :func:`ragen2.metrics.toy.sample_batch` draws.
    """
    from ragen2.metrics import mi_proxies
    from ragen2.metrics.toy import REGIMES, sample_batch

    rng = np.random.default_rng(seed)
    rows = []
    for name, policy in REGIMES.items():
        b = sample_batch(policy, rows_per_column, rng)
        est = mi_proxies(b.logp_sum, b.lengths, b.prompt_index, b.prompt_keys)
        rows.append({"regime": name, "exact_mi": policy.mutual_information(), "estimated_mi": est["mi_seq_estimate"],
                     "exact_cond_entropy": policy.conditional_entropy(),
                     "estimated_cond_entropy": est["conditional_entropy_seq_est"],
                     "exact_entropy": policy.entropy(), "retrieval_accuracy": est["retrieval_accuracy"]})
    return pd.DataFrame(rows)


def regime_points_from_steps(steps: pd.DataFrame, x: str = "collapse_first_turn/conditional_entropy_est",
                             y: str = MI_METRIC) -> pd.DataFrame:
    """First and last (H(Z|X), MI) estimate of each run as points for :func:`ragen2.figures.fig_four_regimes`.

    Returns:
        ``label`` (``<condition> s<seed> start|end``), ``cond_entropy``, ``mi``, ``source`` (``start`` /
        ``end`` checkpoints), ``run_id``.
    """
    rows = []
    wide = steps[steps["metric"].isin([x, y])].pivot_table(index=["run_id", "step"], columns="metric",
                                                           values="value").dropna().reset_index()
    if wide.empty:
        raise ValueError(f"no step logs both {x!r} and {y!r}")
    labels = steps.drop_duplicates("run_id").set_index("run_id")
    for rid, part in wide.groupby("run_id"):
        part = part.sort_values("step")
        for tag, row in (("start", part.iloc[0]), ("end", part.iloc[-1])):
            info = labels.loc[rid]
            rows.append({"label": f"{info['condition']} s{info['seed']} {tag}", "cond_entropy": row[x],
                         "mi": row[y], "source": f"checkpoint ({tag})", "run_id": rid})
    return pd.DataFrame(rows)


def show_toy_policy(dependence: float = 0.5, diversity: int = 4, template_size: int = 4):
    """The toy regimes plus one movable policy on the (H(Z|X), MI) plane, as a displayable PNG image.

    Used as the callback of the notebook-01 sliders (``ipywidgets.interact``); also callable directly.
    """
    from IPython.display import Image

    from ragen2.figures import fig_four_regimes, regime_points_from_toy
    from ragen2.results_io import _figure_bytes

    toy = regime_points_from_toy()
    point = toy_point(dependence, diversity, template_size)
    mine = pd.DataFrame([{"label": f"d={dependence:g}, D={diversity}, T={template_size}",
                          "cond_entropy": point["cond_entropy"], "mi": point["mi"], "source": "your policy"}])
    fig = fig_four_regimes(pd.concat([toy, mine], ignore_index=True))
    return Image(_figure_bytes(fig, "png", 100))
