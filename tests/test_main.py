"""The command-line dispatcher."""

import pytest

from ragen2.__main__ import build_parser, main
from ragen2.config import ConfigError, load_config


def test_train_arguments_parse():
    args = build_parser().parse_args(["train", "r1", "--set", "trainer.steps=3", "--set", "seed=2",
                                      "--run-dir", "out", "--no-resume"])
    assert args.run_id == "r1" and args.set == ["trainer.steps=3", "seed=2"]
    assert args.run_dir == "out" and args.no_resume and args.params == "params.yaml"


def _params(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("base: {seed: 0}\nruns: {a: {}}\n")
    return str(params)


@pytest.mark.parametrize("argv, named", [
    (["train", "nope"], "unknown run id 'nope'"),
    (["train", "a", "--set", "trainer.algo=foo"], "trainer.algo='foo': must be one of ppo, grpo, dapo, dr_grpo"),
    (["train", "a", "--set", "trainer.kl_type=k4"], "trainer.kl_type='k4': must be one of k1, k2, k3"),
    (["train", "a", "--set", "trainer.stepz=3"], "unknown key 'trainer.stepz'"),
    (["train", "a", "--set", "filter.value=1.5"], "filter.value=1.5: must be in (0, 1] for strategy 'top_p'"),
    (["train", "a", "--set", "rollout.group_size=1"], "rollout.group_size=1: must be >= 2"),
    (["train", "a", "--set", "trainer.steps=ten"], "trainer.steps: expected an int, got 'ten'"),
    (["warmstart", "a", "--set", "warm_start.nope=1"], "unknown key 'warm_start.nope'"),
    (["train", "a", "--realization"], "pipeline.realization=None"),
    (["train", "a", "--set", "trainer.lr=[1,2"], "the value '[1,2' of 'trainer.lr' is not valid YAML"),
    (["train", "a", "--set", "trainer.actor_lr={"], "the value '{' of 'trainer.actor_lr' is not valid YAML"),
    (["train", "a", "--set", "trainer.steps"], "--set 'trainer.steps' is not of the form key.path=value"),
    (["warmstart", "a", "--set", "warm_start.steps=]"], "the value ']' of 'warm_start.steps' is not valid YAML"),
    (["train", "a", "--set", "trainer.steps=[1, 2]"], "trainer.steps: expected an int"),
])
def test_bad_input_is_one_line_naming_the_key_and_exit_status_2(tmp_path, capsys, argv, named):
    argv = argv + ["--params", _params(tmp_path)]
    if argv[0] == "train":
        argv += ["--run-dir", str(tmp_path / "run")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"ragen2 {argv[0]}: error: ") and named in err, err
    assert not (tmp_path / "run").exists()  # nothing started


@pytest.mark.parametrize("argv, named", [
    (["train", "a", "--params", "missing.yaml"], "params file 'missing.yaml' does not exist"),
    (["evaluate", "no/such/run"], "run directory 'no/such/run' does not exist"),
    (["grad-analysis", "no/such/run"], "run directory 'no/such/run' does not exist"),
    (["gains", "no/start.json", "ppo=no/end.json"], ".json' does not exist"),
    (["audit", "--policy", "tiny", "--env", "frozenlake", "--env-kwargs", "{bad"], "--env-kwargs '{bad' is not valid JSON"),
    (["audit", "--policy", "tiny", "--env", "nope"], "env.name='nope': must be one of sokoban"),
    (["audit", "--policy", "/nonexistent/model", "--env", "frozenlake"],
     "--policy='/nonexistent/model': no such directory"),
    (["audit", "--policy", ".", "--env", "frozenlake"], "--policy='.': the directory holds no config.json"),
    (["audit", "--policy", "tiny", "--env", "frozenlake", "--samples", "1"], "--samples=1: must be >= 2"),
    (["evaluate", "run", "--episodes", "0"], "--episodes=0: must be >= 1"),
    (["train", "a", "--params", "."], "params file '.' cannot be read"),
    (["train", "a", "--params", "bad.yaml"], "params file 'bad.yaml' is not valid YAML"),
])
def test_missing_files_are_one_line_and_exit_status_2(tmp_path, capsys, monkeypatch, argv, named):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text("base: [unclosed\n")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err, err


BAD_INPUTS = [["train", "nosuchrun"], ["train", "a", "--set", "trainer.stepz=3"], ["warmstart", "nosuchrun"],
              ["evaluate", "no/such/run"], ["grad-analysis", "no/such/run"],
              ["audit", "--policy", "/nonexistent/model", "--env", "frozenlake"],
              ["audit", "--policy", "tiny", "--env", "nope"]]


def test_bad_input_is_answered_before_torch_or_transformers_load(tmp_path):
    """A typo costs well under two seconds: the answer comes before the model libraries are imported (each one
    checked in a fresh interpreter; a loaded torch alone takes seconds)."""
    import subprocess
    import sys

    _params(tmp_path)
    code = ("import sys; from ragen2.__main__ import main; rc = main(sys.argv[1:]); "
            "print(rc, sorted(m for m in ('torch', 'transformers', 'trl', 'dvclive') if m in sys.modules))")
    for argv in BAD_INPUTS:
        proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=tmp_path, capture_output=True, text=True,
                              check=True)
        assert proc.stdout.strip() == "2 []", (argv, proc.stdout, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "error: " in proc.stderr, (argv, proc.stderr)


def test_a_corrupt_checkpoint_is_one_line_naming_the_file(tmp_path, capsys):
    import json

    from ragen2.config import RunConfig, to_dict

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(to_dict(RunConfig())))
    (run / "checkpoints" / "step_000002.pt").write_bytes(b"not a checkpoint")
    (run / "checkpoints" / "latest.json").write_text(json.dumps({"file": "step_000002.pt", "step": 2}))
    assert main(["evaluate", str(run), "--cache-dir", str(tmp_path / "cache")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "step_000002.pt' cannot be read" in err, err
    assert not (tmp_path / "cache").exists()  # failed before any policy was built
    (run / "checkpoints" / "latest.json").write_text("{")
    assert main(["evaluate", str(run), "--cache-dir", str(tmp_path / "cache")]) == 2
    assert "is not a checkpoint pointer" in capsys.readouterr().err


def test_a_command_is_required():
    with pytest.raises(SystemExit):
        main([])


def test_claims_command_merges_section_files(tmp_path, capsys):
    from ragen2.repro.claims import write_claims

    write_claims("a", [("C1", "agree", "diff +3")], tmp_path)
    write_claims("b", [("C5", "inconclusive", "n=2")], tmp_path)
    assert main(["claims", "--dir", str(tmp_path)]) == 0
    assert (tmp_path / "claims.csv").read_text().splitlines()[1:] == ["C1,agree,[a] diff +3", "C5,inconclusive,[b] n=2"]
    assert "not tested by any section: C2" in capsys.readouterr().out


def test_claims_command_gates_each_claim_by_its_preconditions(tmp_path, capsys):
    """A claim whose precondition failed reads untested, naming it and keeping the test's own verdict; a claim whose
    preconditions held or were not measured keeps its verdict; table_preconditions lists every precondition."""
    from ragen2.repro.claims import read_claims, write_claims
    from ragen2.repro.preconditions import Precondition, write_preconditions

    write_claims("a", [("C1", "disagree", "diff -3")], tmp_path)
    write_claims("b", [("C5", "agree", "gap +4")], tmp_path)
    write_preconditions("a", [Precondition("C1", "RL learns", "gain >= 15", "gain +4.0 points", 4.0, False)], tmp_path)
    write_preconditions("b", [Precondition("C5", "a slip can be corrected", "turns > 1", "5 turns", 5.0, True),
                              Precondition("C5", "its runs exist", "runs", "not measured", float("nan"), None)],
                        tmp_path)
    assert main(["claims", "--dir", str(tmp_path)]) == 0
    c1, c5 = read_claims(tmp_path / "claims.csv")
    assert c1.verdict == "untested" and c1.evidence.startswith("precondition unmet: RL learns (gain +4.0 points")
    assert c1.evidence.endswith("the test alone: disagree: [a] diff -3")
    assert (c5.verdict, c5.evidence) == ("agree", "[b] gap +4")
    assert "untested (a precondition failed): C1" in capsys.readouterr().out
    table = (tmp_path / "table_preconditions.csv").read_text().splitlines()
    assert table[0] == "claim,precondition,holds_when,first,held" and len(table) == 4
    assert table[1].endswith(",no") and table[2].endswith(",yes") and table[3].endswith(",not measured")


def test_profile_and_warmstart_arguments_parse():
    args = build_parser().parse_args(["warmstart", "r1", "--expect", "data/cache/warm_start/abc"])
    assert args.run_id == "r1" and args.expect == "data/cache/warm_start/abc" and args.cache_dir == "data/cache"
    assert build_parser().parse_args(["warmstart", "r1", "--set", "warm_start.steps=5"]).set == ["warm_start.steps=5"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["profile", "gpu"])


def test_profile_writes_the_regime_map_params(tmp_path, capsys):
    from ragen2.repro import regime_map

    out = tmp_path / "params.yaml"
    assert main(["profile", "regime_map", "--write", str(out)]) == 0
    assert out.read_text() == regime_map.params_yaml(regime_map.build())
    assert f"{len(regime_map.build().runs)} runs" in capsys.readouterr().out


def test_profile_writes_the_multiturn_curves_params(tmp_path, capsys):
    from ragen2.repro import multiturn_curves

    out = tmp_path / "params.yaml"
    assert main(["profile", "curves_smoke", "--write", str(out)]) == 0
    assert out.read_text() == multiturn_curves.params_yaml(multiturn_curves.build(smoke=True))
    assert f"{len(multiturn_curves.build(smoke=True).runs)} runs" in capsys.readouterr().out


def test_profile_writes_the_learning_screen_params(tmp_path, capsys):
    from ragen2.repro import learning_screen

    out = tmp_path / "params.yaml"
    assert main(["profile", "screen_smoke", "--write", str(out)]) == 0
    assert out.read_text() == learning_screen.params_yaml(learning_screen.build(smoke=True))
    assert f"{len(learning_screen.build(smoke=True).runs)} runs" in capsys.readouterr().out


def test_the_library_raises_config_errors_the_cli_turns_into_one_line(tmp_path):
    with pytest.raises(ConfigError, match="'nope'"):
        load_config("nope", params_path=_params(tmp_path))


@pytest.mark.parametrize("command", ["train-runs", "stale-runs", "commit-runs", "build-warm-starts", "run-stages",
                                     "prune-lock"])
def test_a_pipeline_command_named_here_says_where_it_lives(capsys, command):
    assert main([command, "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"python -m ragen2.repro {command}" in err
