"""Command line: ``python -m ragen2 <command> ...`` (also the ``ragen2`` console script).

Commands:

- ``train RUN_ID [--params params.yaml] [--set key=value ...] [--run-dir DIR] [--cache-dir DIR]
  [--no-resume] [--threads N]``: train one run of ``params.yaml`` into ``data/runs/<RUN_ID>``.
- ``grad-analysis RUN_DIR [--buckets B] [--out FILE]``: the RV-bucketed gradient decomposition on a
  saved run's latest checkpoint.
- ``audit --policy PATH_OR_ID|tiny --env NAME [--env-kwargs JSON] [--prompts 32] [--samples 16] [--seed 0]
  [--out report.json]``: the pre-flight filter audit (``ragen2.audit``), printed as markdown.
- ``profile {cpu,smoke,paper} [--write params.yaml] [--estimate]``: print (or write) the params of an
  experiment profile (``ragen2.repro.profiles``); ``--estimate`` prints its time estimate.
- ``warmstart RUN_ID [--params params.yaml] [--cache-dir DIR] [--expect PATH]``: build (or find) the
  warm start a run starts from; ``--expect`` checks it lands at that path (the DVC out).
- ``claims [--dir paper_figures] [--realization-dir DIR] [--runs-root data/runs]``: merge ``claims_<section>.csv``
  into ``claims.csv``; with the realization check's folder, every claim is also decided on both realizations' runs
  together (:mod:`ragen2.repro.pooled`), a verdict stands only where the first, the second and the pooled runs all
  give it (:mod:`ragen2.repro.realization`), and ``table_power`` gives each pooled test's power.
- ``evaluate RUN_DIR [--checkpoint latest|initial|STEP] [--episodes 512] [--sampling-seeds 8] [--temperature T]
  [--expert] [--out FILE] [--threads N]``: a run's policy re-scored on many paired validation seeds
  (:mod:`ragen2.evaluate`); prints success and its standard error, writes the per-episode successes to ``--out``.
- ``gains START.json LABEL=END.json[,END.json...] ...``: the learning table of several evaluations
  (:func:`ragen2.evaluate.learning_gains`), printed as markdown.
- ``--realization`` (``train``, ``warmstart``): the realization check's second realization of the same runs
  (params.yaml's ``pipeline.realization``; DVC stages ``warmstart_realization`` and ``train_realization``).

The pipeline's plumbing (``train-runs``, ``stale-runs``, ``commit-runs``, ``build-warm-starts``, ``run-stages``,
``prune-lock``) lives under ``python -m ragen2.repro`` (:mod:`ragen2.repro.__main__`).

More subcommands (audit, data) register the same way: a ``_add_<name>(subparsers)`` function that
sets ``func`` on its parser.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ragen2.cli_options import (
    run_command,
    run_overrides,
    set_threads,
    with_options,
)
from ragen2.errors import UserError


def _overrides(args: argparse.Namespace) -> tuple[list[str], str]:
    """:func:`ragen2.cli_options.run_overrides` with the second realization read where ``--realization`` was given."""
    if not getattr(args, "realization", False):
        return run_overrides(args)
    from ragen2.repro.realization import read_realization

    return run_overrides(args, read_realization(args.params))


def _cmd_train(args: argparse.Namespace) -> int:
    from ragen2.config import load_config

    overrides, runs_root = _overrides(args)
    cfg = load_config(args.run_id, params_path=args.params, overrides=overrides)  # checked before torch loads
    run_dir = Path(args.run_dir) if args.run_dir else Path(runs_root) / args.run_id
    from ragen2.trainer.loop import train
    from ragen2.warmstart import initial_policy

    set_threads(args.threads)
    init = initial_policy(cfg, Path(args.cache_dir))  # the tiny policy and the warm start, built if missing
    summary = train(cfg, run_dir, init, resume=not args.no_resume)
    print(json.dumps(summary, indent=2))
    return 0


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train one run declared in params.yaml",
                       parents=with_options("params", "set", "cache", "threads", "realization"))
    p.add_argument("run_id", help="a key of params.yaml's `runs` mapping")
    p.add_argument("--run-dir", default=None, help="output directory (default: data/runs/<RUN_ID>)")
    p.add_argument("--no-resume", action="store_true", help="start over even if a checkpoint exists")
    p.set_defaults(func=_cmd_train)


def _cmd_grad_analysis(args: argparse.Namespace) -> int:
    from ragen2.rundir import read_config

    read_config(args.run_dir)  # a missing or broken run directory is named before torch loads
    from ragen2.trainer.grad_analysis import analyze_checkpoint

    set_threads(args.threads)
    table = analyze_checkpoint(Path(args.run_dir), num_buckets=args.buckets, cache_dir=Path(args.cache_dir))
    if args.out:
        table.to_csv(args.out, index=False)
    print(table.to_string(index=False))
    return 0


def _add_grad_analysis(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("grad-analysis", help="RV-bucketed gradient norms on a run's latest checkpoint",
                       parents=with_options("cache", "threads"))
    p.add_argument("run_dir", help="a run directory with checkpoints/")
    p.add_argument("--buckets", type=int, default=None, help="RV quantile buckets (default: the run's)")
    p.add_argument("--out", default=None, help="also write the table to this CSV file")
    p.set_defaults(func=_cmd_grad_analysis)


def _cmd_audit(args: argparse.Namespace) -> int:
    try:
        env_kwargs = json.loads(args.env_kwargs)
    except json.JSONDecodeError as e:
        raise UserError(f"--env-kwargs {args.env_kwargs!r} is not valid JSON: {e}") from None
    from ragen2.audit import run_audit_command

    set_threads(args.threads)
    report = run_audit_command(args.policy, args.env, env_kwargs=env_kwargs, num_prompts=args.prompts,
                               samples_per_prompt=args.samples, seed=args.seed, out=args.out,
                               cache_dir=args.cache_dir, device=args.device, max_new_tokens=args.max_new_tokens)
    print(report.to_markdown())
    return 0


def _add_audit(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="pre-flight filter audit: zero-variance share, RV spread, keep ratios",
                       parents=with_options("threads"))
    p.add_argument("--policy", required=True, help="`tiny`, a local model directory or a model id")
    p.add_argument("--env", required=True, help="environment registry name, e.g. frozenlake")
    p.add_argument("--env-kwargs", default="{}", help='environment kwargs as JSON, e.g. \'{"success_rate": 1.0}\'')
    p.add_argument("--prompts", type=int, default=32, help="prompt groups (env seeds) (default: 32)")
    p.add_argument("--samples", type=int, default=16, help="rollouts per prompt (default: 16)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default: 0)")
    p.add_argument("--out", default=None, help="also write the report as JSON to this file")
    p.add_argument("--max-new-tokens", type=int, default=None, help="tokens per turn (default: the config's)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda (default: auto)")
    p.add_argument("--cache-dir", default="data/cache", help="tiny-policy cache (default: data/cache)")
    p.set_defaults(func=_cmd_audit)


def _cmd_profile(args: argparse.Namespace) -> int:
    from ragen2.repro import decline_study, learning_screen, multiturn_curves, regime_map
    from ragen2.repro.profiles import build, estimate

    if args.name.startswith("regime_map"):
        profile = regime_map.build(smoke=args.name.endswith("smoke"))
        text = regime_map.params_yaml(profile)
    elif args.name.startswith("curves"):
        profile = multiturn_curves.build(smoke=args.name.endswith("smoke"))
        text = multiturn_curves.params_yaml(profile)
    elif args.name.startswith("screen"):
        profile = learning_screen.build(smoke=args.name.endswith("smoke"))
        text = learning_screen.params_yaml(profile)
    elif args.name.startswith("decline"):
        profile = decline_study.build(smoke=args.name.endswith("smoke"))
        text = decline_study.params_yaml(profile)
    else:
        profile = build(args.name)
        text = profile.yaml()
    if args.write:
        Path(args.write).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write).write_text(text)
        print(f"wrote {args.write}: profile {args.name}, {len(profile.runs)} runs")
    elif not args.estimate:
        print(text, end="")
    if args.estimate:
        try:
            print(f"estimate ({args.name}): {estimate(profile).summary()}")
        except ValueError as e:  # e.g. the paper profile: no CPU measurement for its envs
            print(f"no estimate for profile {args.name!r}: {e}")
    return 0


def _add_profile(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="print or write params.yaml from an experiment profile")
    p.add_argument("name", choices=("cpu", "smoke", "paper", "regime_map", "regime_map_smoke", "curves",
                                    "curves_smoke", "screen", "screen_smoke", "decline", "decline_smoke"),
                   help="the profile (ragen2.repro.profiles; regime_map*: ragen2.repro.regime_map's own pipeline; "
                        "curves*: ragen2.repro.multiturn_curves's; screen*: ragen2.repro.learning_screen's; decline*: "
                        "ragen2.repro.decline_study's)")
    p.add_argument("--write", default=None, metavar="PATH", help="write the params file here instead of printing")
    p.add_argument("--estimate", action="store_true", help="print the wall-time estimate of the profile's grid")
    p.set_defaults(func=_cmd_profile)


def _cmd_warmstart(args: argparse.Namespace) -> int:
    from ragen2.config import load_config

    cfg = load_config(args.run_id, params_path=args.params, overrides=_overrides(args)[0])
    from ragen2.warmstart import initial_policy

    set_threads(args.threads)
    path = Path(initial_policy(cfg, Path(args.cache_dir)))
    if cfg.warm_start.steps == 0 and args.expect:  # no warm start: a marker naming the base policy
        marker = Path(args.expect)
        marker.mkdir(parents=True, exist_ok=True)
        (marker / "initial_policy.json").write_text(json.dumps({"policy": str(path), "warm_start_steps": 0}) + "\n")
        path = marker
    if args.expect and path.resolve() != Path(args.expect).resolve():
        raise UserError(f"warm start of {args.run_id!r} is at {path}, not at --expect {args.expect}; "
                        "regenerate params.yaml with `python -m ragen2 profile ... --write params.yaml`")
    print(path)
    return 0


def _add_warmstart(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("warmstart", help="build (or find) the warm start a run starts from",
                       parents=with_options("params", "set", "cache", "threads", "realization"))
    p.add_argument("run_id", help="a key of params.yaml's `runs` mapping")
    p.add_argument("--expect", default=None, metavar="PATH", help="fail unless the warm start lands here")
    p.set_defaults(func=_cmd_warmstart)


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from ragen2.rundir import read_config

    if args.sampling_seeds < 1:
        raise UserError(f"--sampling-seeds={args.sampling_seeds}: must be >= 1")
    if args.episodes < 1:
        raise UserError(f"--episodes={args.episodes}: must be >= 1")
    read_config(args.run_dir)  # a missing or broken run directory is named before torch loads
    from ragen2.evaluate import evaluate_policy, expert_success, load_run_policy
    from ragen2.fileio import write_json_atomic

    set_threads(args.threads)
    cfg, actor, tokenizer = load_run_policy(Path(args.run_dir), args.checkpoint, cache_dir=Path(args.cache_dir))
    result = evaluate_policy(actor, tokenizer, cfg, policy=f"{args.run_dir}@{args.checkpoint}",
                             episodes=args.episodes, sampling_seeds=list(range(args.sampling_seeds)),
                             temperature=args.temperature)
    report = result.to_dict()
    if args.expert:
        report["expert_success"] = expert_success(cfg, args.episodes)
    if args.out:
        write_json_atomic(Path(args.out), report)
    per_episode = ("env_seeds", "successes", "turns", "invalid_turns", "response_tokens")
    print(json.dumps({k: v for k, v in report.items() if k not in per_episode}))
    return 0


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="re-score a run's policy on many paired validation seeds",
                       parents=with_options("cache", "threads"))
    p.add_argument("run_dir", help="a run directory (config.json, checkpoints/)")
    p.add_argument("--checkpoint", default="latest", help="latest (default), initial (the warm start) or a kept step")
    p.add_argument("--episodes", type=int, default=512, help="env seeds from the run's val_seed on (default: 512)")
    p.add_argument("--sampling-seeds", type=int, default=8, help="trajectories per env seed (default: 8)")
    p.add_argument("--temperature", type=float, default=None,
                   help="sampling temperature, 0 = greedy (default: the run's val_temperature)")
    p.add_argument("--expert", action="store_true", help="also score the expert on the same env seeds")
    p.add_argument("--out", default=None, help="write the evaluation (with per-episode successes) to this JSON file")
    p.set_defaults(func=_cmd_evaluate)


def _cmd_gains(args: argparse.Namespace) -> int:
    from ragen2.evaluate import Evaluation, learning_gains
    from ragen2.markdown import to_markdown

    def read(path: str) -> Evaluation:
        from ragen2.rundir import read_json

        return Evaluation.from_dict(read_json(path))

    ends = {}
    for item in args.ends:
        label, sep, paths = item.partition("=")
        if not sep or not label or not paths:
            raise UserError(f"{item!r} is not of the form LABEL=END.json[,END.json...]")
        ends[label] = [read(p) for p in paths.split(",")]
    table = learning_gains(read(args.start), ends)
    print(to_markdown(table))
    return 0


def _add_gains(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gains", help="learning table: paired success gains of trained policies over their start")
    p.add_argument("start", help="`evaluate --checkpoint initial --out` file of the starting policy")
    p.add_argument("ends", nargs="+", metavar="LABEL=END.json[,END.json...]",
                   help="evaluations of the trained runs (same seeds), grouped under a label")
    p.set_defaults(func=_cmd_gains)


def _cmd_claims(args: argparse.Namespace) -> int:
    from ragen2.repro.artifacts import save_table
    from ragen2.repro.claims import merge_claims, write_merged
    from ragen2.repro.preconditions import TABLE, TABLE_CAPTION, gate, precondition_table

    folders = {"first": args.dir, **({"second": args.realization_dir} if args.realization_dir else {})}
    table, preconditions = precondition_table(folders)
    table_path = save_table(table, TABLE, args.dir, caption=TABLE_CAPTION)["md"]

    def gated(claim):
        return gate(claim, preconditions)

    if args.realization_dir:
        from ragen2.repro.pooled import CLAIM_LOADERS, pooled_claims, pooled_verdicts
        from ragen2.repro.realization import merge_with_realization, read_realization
        from ragen2.repro.verdicts import POWER_CAPTION, Verdict, power_table

        realization = read_realization(args.params)
        rv_notebook = CLAIM_LOADERS["C3"][0]  # whose per-run quartile tables are C3's units
        verdicts = pooled_verdicts((args.runs_root, realization.runs_root),
                                   (args.dir, Path(args.realization_dir) / rv_notebook))
        claims_path, check_path, claims = merge_with_realization(args.dir, args.realization_dir, realization.label,
                                                                 [gated(c) for c in pooled_claims(verdicts)], gated)
        power = power_table({k: x for k, x in verdicts.items() if isinstance(x, Verdict)})
        power_path = save_table(power, "table_power", args.dir, caption=POWER_CAPTION)["md"]
        fragile = [c.claim for c in claims if c.evidence.startswith(("fragile", "unchecked"))]
        untested = [c.claim for c in claims if c.verdict == "untested"]
        print(f"wrote {claims_path}, {check_path}, {power_path} and {table_path}: {len(claims)} claims"
              + (f"; fragile or unchecked: {', '.join(fragile)}" if fragile else "; every verdict holds")
              + (f"; untested (a precondition failed): {', '.join(untested)}" if untested else ""))
        return 0
    merged = merge_claims(args.dir)
    claims = [gated(c) for c in merged.rows]
    write_merged(merged.path, claims)
    untested = [c.claim for c in claims if c.verdict == "untested"]
    print(f"wrote {merged.path} and {table_path}: {len(claims)} claims from sections {', '.join(merged.sections)}"
          + (f"; not tested by any section: {', '.join(merged.missing)}" if merged.missing else "")
          + (f"; untested (a precondition failed): {', '.join(untested)}" if untested else ""))
    return 0


def _add_claims(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("claims", help="merge paper_figures/claims_<section>.csv into claims.csv, each claim gated by its "
                       "preconditions (paper_figures/table_preconditions)",
                       parents=with_options("params"))
    p.add_argument("--dir", default="paper_figures", help="folder of the section files (default: paper_figures)")
    p.add_argument("--realization-dir", default=None, metavar="DIR",
                   help="the second realization's notebook folders (DIR/<notebook>/claims_*.csv): every claim is also "
                        "decided on both realizations' runs together, claims.csv keeps a verdict only where the first, "
                        "the second and the pooled runs all give it, realization_check.csv compares them and "
                        "table_power.md gives each pooled test's power")
    p.add_argument("--runs-root", default="data/runs", help="the first realization's runs (default: data/runs); the "
                   "second's is params.yaml's pipeline.realization.runs_root")
    p.set_defaults(func=_cmd_claims)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragen2", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_train, _add_grad_analysis, _add_audit, _add_profile, _add_warmstart, _add_claims, _add_evaluate,
                _add_gains):
        add(sub)
    return parser


MOVED = ("train-runs", "stale-runs", "commit-runs", "build-warm-starts", "run-stages", "prune-lock")
"""The pipeline's plumbing commands, which live under ``python -m ragen2.repro``."""


def main(argv: list[str] | None = None) -> int:
    """Run a command; a user error (bad key, value, run id or path) is one line on stderr and exit status 2."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in MOVED:
        print(f"ragen2: error: {argv[0]} is a pipeline command: python -m ragen2.repro {argv[0]} ...", file=sys.stderr)
        return 2
    return run_command(build_parser(), argv, "ragen2")


if __name__ == "__main__":
    sys.exit(main())
