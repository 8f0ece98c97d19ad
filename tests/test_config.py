"""Strict config loading and the 1:1 mapping between params.yaml and RunConfig."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ragen2.config import (
    ConfigError,
    RunConfig,
    apply_overrides,
    deep_merge,
    flatten,
    from_dict,
    load_config,
    run_ids,
    to_dict,
)

PARAMS = Path(__file__).resolve().parents[1] / "params.yaml"


def test_default_round_trip():
    cfg = RunConfig()
    assert from_dict(RunConfig, to_dict(cfg)) == cfg


def test_base_section_is_a_complete_run_config():
    """The base section of params.yaml maps 1:1 onto RunConfig: every field, nothing else."""
    base = yaml.safe_load(PARAMS.read_text())["base"]
    assert to_dict(load_config(None, PARAMS)) == to_dict(from_dict(RunConfig, base))
    assert set(base) == set(to_dict(RunConfig()))
    for section, fields in to_dict(RunConfig()).items():
        if isinstance(fields, dict) and section != "env":
            assert set(base[section]) == set(fields), section


def test_every_declared_run_loads():
    """Every run of params.yaml gives a strict RunConfig (parsed once: load_config re-reads the file per run)."""
    params = yaml.safe_load(PARAMS.read_text())
    assert list(params["runs"]) == run_ids(PARAMS)
    for overrides in params["runs"].values():
        cfg = from_dict(RunConfig, deep_merge(params["base"], overrides or {}))
        assert isinstance(cfg, RunConfig)
    if params["runs"]:
        first = next(iter(params["runs"]))
        assert load_config(first, PARAMS) == from_dict(RunConfig, deep_merge(params["base"], params["runs"][first]))


def test_unknown_key_is_named():
    with pytest.raises(ConfigError, match="'actor_lrr'"):
        from_dict(RunConfig, {"trainer": {"actor_lrr": 1.0}})
    with pytest.raises(ConfigError, match="'bogus'"):
        from_dict(RunConfig, {"bogus": 1})


def test_wrong_type_is_named():
    with pytest.raises(ConfigError, match="trainer.steps"):
        from_dict(RunConfig, {"trainer": {"steps": "ten"}})
    with pytest.raises(ConfigError, match="trainer.steps"):
        from_dict(RunConfig, {"trainer": {"steps": 1.5}})
    with pytest.raises(ConfigError, match="collapse.enabled"):
        from_dict(RunConfig, {"collapse": {"enabled": "yes"}})
    with pytest.raises(ConfigError, match="rollout"):
        from_dict(RunConfig, {"rollout": 3})


def test_overrides():
    cfg = apply_overrides(RunConfig(), ["trainer.actor_lr=1e-4", "trainer.algo=grpo",
                                        "env.kwargs.success_rate=1.0"])
    assert cfg.trainer.actor_lr == pytest.approx(1e-4)
    assert cfg.trainer.algo == "grpo"
    assert cfg.env.kwargs == {"success_rate": 1.0}
    with pytest.raises(ConfigError, match="trainer.nope"):
        apply_overrides(RunConfig(), ["trainer.nope=1"])
    with pytest.raises(ConfigError, match="key.path=value"):
        apply_overrides(RunConfig(), ["trainer.steps"])


def test_unknown_run_id(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump({"base": {}, "runs": {"a": {}}}))
    assert run_ids(p) == ["a"]
    with pytest.raises(ConfigError, match="'b'"):
        load_config("b", p)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(None, tmp_path / "missing.yaml")


def test_collapse_alarm_floors_validate_and_match_the_monitor():
    from ragen2.config import CollapseConfig
    from ragen2.metrics import CollapseMonitor

    cfg, monitor = CollapseConfig(), CollapseMonitor()
    assert (cfg.warn_min_peak, cfg.warn_noise_sigmas) == (monitor.warn_min_peak, monitor.warn_noise_sigmas)
    assert CollapseConfig(warn_min_peak=0.0, warn_noise_sigmas=0.0).warn_noise_sigmas == 0.0
    with pytest.raises(ConfigError, match=r"collapse.warn_min_peak=-0.1: must be >= 0"):
        CollapseConfig(warn_min_peak=-0.1)
    with pytest.raises(ConfigError, match="collapse.warn_noise_sigmas"):
        CollapseConfig(warn_noise_sigmas=float("inf"))


def test_flatten_dotted_keys():
    assert flatten({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": "x"}) == {"a.b": 1, "a.c.d": (1, 2), "e": "x"}
