"""Early-stopping rules (docs/method.md §4.7)."""

from ragen2.trainer.early_stop import EarlyStopper


def test_empty_filter_rule_resets_on_non_empty_step():
    s = EarlyStopper(empty_stop_steps=3)
    assert not s.on_empty_step() and not s.on_empty_step()
    s.on_step(1.0)
    assert not s.on_empty_step() and not s.on_empty_step()
    assert s.on_empty_step() and s.reason == "empty_filtered_steps"


def test_reward_variance_collapse_after_baseline_and_full_window():
    s = EarlyStopper()
    for _ in range(10):
        assert not s.on_step(1.0)  # baseline 1.0
    for _ in range(9):
        assert not s.on_step(0.05)
    assert s.on_step(0.05) and s.reason == "reward_variance_collapse"
    off = EarlyStopper(rv_collapse=False)
    assert not any(off.on_step(v) for v in [1.0] * 10 + [0.0] * 20)


def test_window_with_one_healthy_value_does_not_stop():
    s = EarlyStopper()
    for v in [1.0] * 10 + [0.0] * 9 + [0.2] + [0.0] * 8:
        assert not s.on_step(v)


def test_low_validation_success_and_state_round_trip():
    s = EarlyStopper(low_val_patience=3)
    s.on_validation(0.0)
    s.on_validation(0.5)  # resets
    s.on_validation(0.0)
    s.on_validation(0.005)
    t = EarlyStopper(low_val_patience=3)
    t.load_state_dict(s.state_dict())
    assert t.on_validation(0.0) and t.reason == "low_validation_success"
