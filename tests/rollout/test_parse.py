import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragen2.rollout.parse import parse_response


def test_match_rebuilds_stored_response_and_drops_tail():
    p = parse_response("<think> go down\nthen right </think>\n <answer> Down ||Right|| Up </answer> junk", 2)
    assert p.matched
    assert p.think == "go down\nthen right"
    assert p.actions == ["Down", "Right"]
    assert p.stored_response == "<think>go down\nthen right</think><answer>Down || Right</answer>"


def test_no_match_keeps_raw_text_and_no_actions():
    raw = "<think> I forgot the answer tag"
    p = parse_response(raw, 2)
    assert not p.matched and p.actions == [] and p.think == ""
    assert p.stored_response == raw


def test_first_match_wins_and_empty_actions_dropped():
    text = "<think>a</think><answer> || Left ||  </answer><think>b</think><answer>Up</answer>"
    p = parse_response(text, 5)
    assert p.think == "a" and p.actions == ["Left"]


def test_tag_strings_are_stripped_inside():
    p = parse_response("<think><think>x<|im_end|></think><answer><|im_start|>Up</answer>", 2)
    assert p.think == "x" and p.actions == ["Up"]


def test_text_between_think_and_answer_is_no_match():
    assert not parse_response("<think>x</think> so <answer>Up</answer>", 2).matched


def test_bad_max_actions():
    with pytest.raises(ValueError, match="max_actions"):
        parse_response("<think>x</think><answer>Up</answer>", 0)


@given(think=st.text(max_size=30), actions=st.lists(st.text(max_size=8), max_size=4),
       k=st.integers(1, 3))
def test_stored_response_reparses_to_itself(think, actions, k):
    text = f"<think>{think}</think><answer>{' || '.join(actions)}</answer>"
    first = parse_response(text, k)
    if first.matched:
        again = parse_response(first.stored_response, k)
        assert again.matched
        assert (again.think, again.actions, again.stored_response) == (
            first.think, first.actions, first.stored_response)
        assert len(first.actions) <= k
