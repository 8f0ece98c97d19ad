"""Bandit: pick one of two named arms, judging only by what the names suggest (v0).

## Description

A one-step, two-armed bandit whose arms carry names. One name suggests a steady, safe occupation
(the low-risk arm, e.g. ``Teacher``), the other a risky one (the high-risk arm, e.g. ``Trader``).
The payoffs are never shown: the agent must infer from the names' symbolic meaning that the risky
arm has the higher expected reward. There are 12 training name pairs and 8 held-out test pairs.

## Actions

Any string: an arm's name, matched case-insensitively after stripping surrounding whitespace.
Anything else is an invalid action: reward 0, ``action_is_valid=False``, and nothing changes (the
episode goes on, as the text-env contract requires; in the reference the agent loop drops such an
answer before it reaches the environment).

## Observation

A fixed prompt naming the two arms in a seed-dependent order and asking which is more likely to give
the higher reward, to be answered as ``<answer> Name </answer>``. It does not change after the step.

## Rewards

- low-risk arm: always 0.1;
- high-risk arm: 1.0 with probability 0.25, else 0.0 (expected 0.25 > 0.1);
- invalid action: 0.0.

``success`` is true when the high-risk arm was chosen, whatever its payout this time.

## Episode end

Terminated after the first valid action (one arm pull per episode). Invalid actions do not end it;
the agent loop's budget of one action per trajectory does.

## Arguments

- ``split`` (``"train"`` or ``"test"``): which list of name pairs to draw from.

``reset(seed=s)`` picks the pair and the arm order from ``s`` alone, and the high arm's payout is
drawn from the same seeded generator, so an episode is a pure function of its seed. (The reference
adds a per-instance class counter to the seed, so members of one prompt group see different pairs;
here the members of a group that share a seed see the same pair and order, and differ only in the
payout draw if their actions differ.)

## Version History

- v0: initial version.
"""

from __future__ import annotations

from typing import Any

from ragen2.envs.base import AgentDefaults, ExpertMove, StepResult, TextEnv

LOW_ARM_REWARD = 0.1
HIGH_ARM_REWARD = 1.0
HIGH_ARM_PROBABILITY = 0.25

#: (low-risk name, high-risk name) pairs used for training.
TRAIN_PAIRS: tuple[tuple[str, str], ...] = (
    ("Teacher", "Trader"),
    ("Librarian", "Investor"),
    ("Gardener", "Gambler"),
    ("Accountant", "Speculator"),
    ("Nurse", "Stuntman"),
    ("Baker", "Prospector"),
    ("Postman", "Daredevil"),
    ("Farmer", "Entrepreneur"),
    ("Clerk", "Racer"),
    ("Plumber", "Skydiver"),
    ("Janitor", "Mountaineer"),
    ("Bookkeeper", "Adventurer"),
)
#: Held-out (low-risk, high-risk) pairs; no name appears in TRAIN_PAIRS.
TEST_PAIRS: tuple[tuple[str, str], ...] = (
    ("Receptionist", "Explorer"),
    ("Cashier", "Stockbroker"),
    ("Pharmacist", "Bettor"),
    ("Archivist", "Jockey"),
    ("Dentist", "Bullfighter"),
    ("Secretary", "Volcanologist"),
    ("Teller", "Daytrader"),
    ("Optician", "Acrobat"),
)
SPLITS = {"train": TRAIN_PAIRS, "test": TEST_PAIRS}


def observation_text(first: str, second: str) -> str:
    """The prompt naming the two arms in the order shown."""
    return (
        f"You face two slot machines, called {first} and {second}. Pulling one pays some reward. "
        "Judging by what each name suggests, which machine is more likely to give you the higher "
        f"reward? Answer with its name, as in <answer> {first} </answer> or <answer> {second} </answer>."
    )


class BanditEnv(TextEnv):
    """Two-armed named bandit; see the module docstring for the full specification."""

    name = "bandit"
    instruction = ""  # as in the reference: the arm names come only from the observation
    agent_defaults = AgentDefaults(
        max_turns=1, max_actions_per_turn=1, max_actions_per_traj=1, max_tokens_hint=100
    )

    def __init__(self, *, split: str = "train", render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        if split not in SPLITS:
            raise ValueError(f"split must be one of {sorted(SPLITS)}, got {split!r}")
        self.split = split
        self.pairs = SPLITS[split]
        self.low_arm = self.high_arm = ""
        self.arm_order: tuple[str, str] = ("", "")

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        pair_index = int(self.np_random.integers(len(self.pairs)))
        self.low_arm, self.high_arm = self.pairs[pair_index]
        high_first = bool(self.np_random.integers(2))
        self.arm_order = (self.high_arm, self.low_arm) if high_first else (self.low_arm, self.high_arm)
        info = {"pair_index": pair_index, "low_arm": self.low_arm, "high_arm": self.high_arm}
        return observation_text(*self.arm_order), info

    def _step(self, action: str) -> StepResult:
        obs = observation_text(*self.arm_order)
        choice = action.strip().casefold()
        if choice == self.high_arm.casefold():
            paid = bool(self.np_random.random() < HIGH_ARM_PROBABILITY)
            reward = HIGH_ARM_REWARD if paid else 0.0
            return StepResult(obs, reward, terminated=True, success=True, info={"arm": self.high_arm})
        if choice == self.low_arm.casefold():
            return StepResult(obs, LOW_ARM_REWARD, terminated=True, success=False, info={"arm": self.low_arm})
        return StepResult(obs, 0.0, terminated=False, action_is_valid=False, info={"arm": None})

    def expert(self) -> ExpertMove:
        """Always the high-risk arm, whose expected reward is higher."""
        if not self.high_arm:
            raise RuntimeError("BanditEnv.expert() called before reset()")
        think = (
            f"{self.high_arm} takes risks, {self.low_arm} plays safe. "
            f"expected {self.high_arm} {HIGH_ARM_REWARD * HIGH_ARM_PROBABILITY:g} > {self.low_arm} "
            f"{LOW_ARM_REWARD:g}."
        )
        return ExpertMove(action=self.high_arm, think=think)
