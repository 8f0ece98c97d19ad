"""The command-line dispatcher."""

import pytest

from ragen2.__main__ import build_parser, main
from ragen2.config import ConfigError


def test_train_arguments_parse():
    args = build_parser().parse_args(["train", "r1", "--set", "trainer.steps=3", "--set", "seed=2",
                                      "--run-dir", "out", "--no-resume"])
    assert args.run_id == "r1" and args.set == ["trainer.steps=3", "seed=2"]
    assert args.run_dir == "out" and args.no_resume and args.params == "params.yaml"


def test_unknown_run_id_is_named(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("base: {seed: 0}\nruns: {a: {}}\n")
    with pytest.raises(ConfigError, match="'nope'"):
        main(["train", "nope", "--params", str(params), "--run-dir", str(tmp_path / "run")])


def test_a_command_is_required():
    with pytest.raises(SystemExit):
        main([])


def test_claims_command_merges_section_files(tmp_path, capsys):
    from ragen2.repro.claims import write_claims

    write_claims("a", [("C1", "agree", "diff +3")], tmp_path)
    write_claims("b", [("C5", "inconclusive", "n=2")], tmp_path)
    assert main(["claims", "--dir", str(tmp_path)]) == 0
    assert (tmp_path / "claims.csv").read_text().splitlines()[1:] == ["C1,agree,[a] diff +3", "C5,inconclusive,[b] n=2"]
    assert "untested: C2" in capsys.readouterr().out


def test_profile_and_warmstart_arguments_parse():
    args = build_parser().parse_args(["warmstart", "r1", "--expect", "data/cache/warm_start/abc"])
    assert args.run_id == "r1" and args.expect == "data/cache/warm_start/abc" and args.cache_dir == "data/cache"
    assert build_parser().parse_args(["warmstart", "r1", "--set", "warm_start.steps=5"]).set == ["warm_start.steps=5"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["profile", "gpu"])


def test_warmstart_applies_set_overrides_and_names_a_bad_one(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("base: {seed: 0}\nruns: {a: {}}\n")
    with pytest.raises(ConfigError, match="nope"):
        main(["warmstart", "a", "--params", str(params), "--set", "warm_start.nope=1", "--cache-dir", str(tmp_path)])


def test_stale_runs_are_the_train_stages_of_dvc_status():
    from ragen2.__main__ import stale_train_stages

    status = {"data": [{"changed outs": {}}], "train@frozenlake__grpo__none__main__s1": [],
              "warmstart@abc": [], "train@frozenlake__ppo__none__main__s0": [], "nb_03_main_results": []}
    assert stale_train_stages(status) == ["frozenlake__grpo__none__main__s1", "frozenlake__ppo__none__main__s0"]
    assert stale_train_stages({}) == []
