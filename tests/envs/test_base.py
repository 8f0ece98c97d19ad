"""The base class's spaces: every env gets its own, unseeded, equal to a freshly built TextSpace."""

from ragen2.envs import make
from ragen2.envs.base import TextSpace


def test_each_env_has_its_own_unseeded_spaces_that_sample_like_a_new_text_space():
    a, b = make("frozenlake"), make("frozenlake")
    assert a.action_space is not b.action_space and a.observation_space is not b.observation_space
    assert isinstance(a.action_space, TextSpace) and a.action_space.max_length == 4096
    assert a.observation_space.max_length == 65536
    a.action_space.seed(7)
    drawn = [a.action_space.sample() for _ in range(3)]
    assert b.action_space._np_random is None  # seeding one env's space leaves the other's alone
    reference = TextSpace(max_length=4096)
    reference.seed(7)
    assert drawn == [reference.sample() for _ in range(3)]
    assert a.action_space.contains("x" * 4096) and not a.action_space.contains("x" * 4097)
