"""WebShop: navigation, purchase reward, hostile actions, file loading, expert and determinism."""

from __future__ import annotations

import copy
import dataclasses
import json
import time

import numpy as np
import pytest

from ragen2 import envs
from ragen2.envs.webshop import ADVICE, WebShopEnv, purchase_score, write_offline_data
from ragen2.envs.webshop_catalog import load_catalog, parse_price, synthetic_catalog, tokenize

ACTIONS_PREFIX = "You must choose from these actions: "


def _actions(obs: str) -> list[str]:
    line = obs.splitlines()[-1]
    assert line.startswith(ACTIONS_PREFIX)
    rest = line[len(ACTIONS_PREFIX):]
    return rest.split(", ") if rest else []


def _open_product(env: WebShopEnv, asin: str) -> None:
    """From the search page, search the product's title and click it (paging if needed)."""
    env.step(f"search[{env.catalog.product(asin).title}]")
    while asin.lower() not in env.clickables():
        assert "next >" in env.clickables(), f"{asin} not found by searching its title"
        env.step("click[next >]")
    env.step(f"click[{asin.lower()}]")
    assert env.page == "item" and env.item.asin == asin


@pytest.fixture
def env() -> WebShopEnv:
    e = envs.make("webshop")
    e.reset(seed=0)
    return e


# -- navigation -----------------------------------------------------------------------------
def test_search_page_lists_only_the_search_action(env):
    obs = env._obs
    assert obs.startswith("WebShop [SEP] Instruction: [SEP] " + env.goal.instruction)
    assert ADVICE in obs
    assert _actions(obs) == ["search[<content>]"]


def test_navigation_between_pages(env):
    _, _, _, _, info = env.step("search[men's shirt cotton]")
    assert info["action_is_valid"] and info["action_is_effective"]
    assert env.page == "results" and 10 < len(env.results) <= 50
    acts = _actions(env._obs)
    assert acts[:2] == ["click[back to search]", "click[next >]"] and "click[< prev]" not in acts
    assert f"Page 1 (Total results: {len(env.results)})" in env._obs
    assert len(acts) == 2 + 10 and all(a.lower() == a for a in acts)
    first_page = env._obs
    env.step("click[next >]")
    assert env.page_no == 2 and "click[< prev]" in _actions(env._obs)
    env.step("click[< prev]")
    assert env._obs == first_page
    asin = env.results[0].asin
    env.step(f"click[{asin}]")  # upper case works: the target is lower-cased
    assert env.page == "item" and env.item.asin == asin
    acts = _actions(env._obs)
    assert acts[:2] == ["click[back to search]", "click[< prev]"] and acts[-1] == "click[buy now]"
    for name, values in env.item.options:
        assert all(f"click[{v.lower()}]" in acts for v in values), name
    env.step("click[description]")
    assert env.item.description in env._obs and _actions(env._obs) == ["click[back to search]", "click[< prev]"]
    env.step("click[< prev]")
    env.step("click[features]")
    assert env.item.features[0] in env._obs
    env.step("click[< prev]")
    assert env.page == "item"
    env.step("click[< prev]")
    assert env._obs == first_page
    env.step("click[back to search]")
    assert env.page == "search" and _actions(env._obs) == ["search[<content>]"]


def test_last_results_page_has_no_next(env):
    env.step("search[coffee mug ceramic]")
    while "next >" in env.clickables():
        env.step("click[next >]")
    assert env.page_no == env._last_page > 1
    assert "click[next >]" not in _actions(env._obs) and "Next >" not in env._obs
    obs, *_, info = env.step("click[next >]")
    assert not info["action_is_valid"] and obs == env._obs


def test_choosing_an_option_is_shown_and_repeating_it_is_not_effective(env):
    _open_product(env, env.goal.asin)
    name, value = env.goal.options[0]
    _, _, _, _, info = env.step(f"click[{value}]")
    assert info["action_is_effective"] and env.chosen[name] == value
    assert f"Selected: {name}: {value}" in env._obs
    _, _, _, _, info = env.step(f"click[{value}]")
    assert info["action_is_valid"] and not info["action_is_effective"]


# -- reward -----------------------------------------------------------------------------------
def test_perfect_purchase_is_reward_one(env):
    _open_product(env, env.goal.asin)
    for _, value in env.goal.options:
        env.step(f"click[{value}]")
    obs, reward, terminated, truncated, info = env.step("click[buy now]")
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
    assert info["raw_reward"] == 1.0 and info["r_type"] == 1.0
    assert _actions(obs) == []
    assert env.step("click[buy now]")[4]["action_is_valid"] is False  # after the end


@pytest.mark.parametrize("binary", [True, False])
def test_wrong_option_loses_exactly_one_share(binary):
    env = envs.make("webshop", binary_reward=binary)
    env.reset(seed=3)
    goal = env.goal
    name, value = goal.options[0]
    other = next(v for v in env.target.option_map[name] if v != value)
    _open_product(env, goal.asin)
    env.step(f"click[{other}]")
    for _, v in goal.options[1:]:
        env.step(f"click[{v}]")
    _, reward, terminated, _, info = env.step("click[buy now]")
    n = len(goal.attributes) + len(goal.options) + 1
    assert terminated and not info["success"]
    assert info["raw_reward"] == pytest.approx((n - 1) / n)
    assert reward == (0.0 if binary else pytest.approx((n - 1) / n))


def test_buying_without_choosing_options_is_not_a_success(env):
    _open_product(env, env.goal.asin)
    _, reward, _, _, info = env.step("click[buy now]")
    assert reward == 0.0 and info["option_matches"] == 0 and info["raw_reward"] < 1


def test_wrong_type_scores_zero(env):
    target = env.target
    wanted = set(tokenize(target.title))
    other = next(p for p in env.catalog.products if p.category != target.category
                 and not wanted & set(tokenize(p.title)) and not set(p.attributes) & set(target.attributes))
    _open_product(env, other.asin)
    _, reward, terminated, _, info = env.step("click[buy now]")
    assert terminated and reward == 0.0 and info["r_type"] == 0.0 and info["raw_reward"] == 0.0


def test_over_price_loses_the_price_share(env):
    goal, target = env.goal, env.target
    chosen = dict(goal.options)
    assert purchase_score(target, target, goal, chosen).total == 1.0
    pricey = dataclasses.replace(target, price=goal.price_upper + 0.01)
    score = purchase_score(pricey, target, goal, chosen)
    n = len(goal.attributes) + len(goal.options) + 1
    assert not score.price_ok and score.total == pytest.approx((n - 1) / n)


def test_goal_price_cap_is_above_the_target_price():
    catalog = synthetic_catalog(500, 0)
    for goal in catalog.goals:
        price = catalog.product(goal.asin).price
        assert price < goal.price_upper <= 10 * (int(price // 10) + 4)


# -- hostile actions --------------------------------------------------------------------------
@pytest.mark.parametrize("action", ["click[", "search[]", "search[   ]", "click[buy now]", "click[]",
                                    "x" * 100_000, "search[" + "y" * 100_000 + "]", "click[中文 😀]",
                                    "\u202e\u200b", "buy now", "search", "click[next >]"])
def test_hostile_actions_change_nothing_on_the_search_page(env, action):
    before = env._obs
    obs, reward, terminated, truncated, info = env.step(action)
    assert obs == before and reward == 0.0 and not (terminated or truncated)
    assert not info["action_is_valid"] and not info["action_is_effective"]
    assert env.page == "search"


def test_search_is_invalid_without_a_search_bar_and_names_are_case_insensitive(env):
    env.step("search[yoga mat]")
    before = env._obs
    assert not env.step("search[headphones]")[4]["action_is_valid"] and env._obs == before
    assert env.step("  CLICK[Back To Search]  ")[4]["action_is_valid"]
    assert env.page == "search"
    assert env.step("Search[yoga mat]")[4]["action_is_valid"]


def test_unicode_search_with_no_hits_gives_an_empty_results_page(env):
    env.step("search[中文 😀]")
    assert env.page == "results" and env.results == []
    assert _actions(env._obs) == ["click[back to search]"]


def test_max_steps_truncates():
    env = envs.make("webshop", max_steps=3)
    env.reset(seed=1)
    assert env.step("nope")[3] is False and env.step("nope")[3] is False
    _, _, terminated, truncated, _ = env.step("nope")
    assert (terminated, truncated) == (False, True) and env.done


# -- construction, splits, determinism --------------------------------------------------------
def test_splits_are_disjoint_and_cover_all_goals():
    catalog = synthetic_catalog(500, 0)
    ids = {s: set(catalog.split_goal_ids(s).tolist()) for s in ("train", "val", "test")}
    assert not ids["train"] & ids["val"] and not ids["train"] & ids["test"] and not ids["val"] & ids["test"]
    assert set().union(*ids.values()) == set(range(len(catalog.goals)))
    env = envs.make("webshop", split="test")
    _, info = env.reset(seed=4)
    assert info["goal_id"] in ids["test"]
    with pytest.raises(ValueError, match="goal_id"):
        env.reset(options={"goal_id": min(ids["train"])})


def test_catalog_is_deterministic_and_shared():
    cached = synthetic_catalog(500, 0)
    rebuilt = synthetic_catalog.__wrapped__(500, 0)
    assert rebuilt.products == cached.products and rebuilt.goals == cached.goals
    assert synthetic_catalog.__wrapped__(500, 1).products != cached.products
    env = envs.make("webshop")
    assert env.catalog is cached and copy.deepcopy(env).catalog is cached


def test_same_seed_same_episode_and_unseeded_resets_are_reproducible():
    a, b = envs.make("webshop"), envs.make("webshop")
    assert a.reset(seed=42) == b.reset(seed=42)
    assert [a.reset()[0] for _ in range(3)] == [b.reset()[0] for _ in range(3)]


def test_reset_and_step_are_fast():
    env = envs.make("webshop")
    start = time.perf_counter()
    steps = 0
    for seed in range(50):
        env.reset(seed=seed)
        while not env.done:
            env.step(env.expert().action)
            steps += 1
    per_call = (time.perf_counter() - start) / (50 + steps)
    assert per_call < 0.01, f"{per_call * 1e3:.1f} ms per reset/step"


# -- expert -----------------------------------------------------------------------------------
def _expert_episode(env: WebShopEnv, seed: int) -> tuple[bool, int]:
    env.reset(seed=seed)
    info, n = {"success": False}, 0
    while not env.done:
        move = env.expert()
        assert move.think and move.action
        *_, info = env.step(move.action)
        assert info["action_is_valid"], (seed, move)
        n += 1
    return bool(info["success"]), n


def test_expert_succeeds_within_the_agent_budget():
    env = envs.make("webshop")
    results = [_expert_episode(env, seed) for seed in range(100)]
    success = np.mean([s for s, _ in results])
    lengths = [n for _, n in results]
    assert success >= 0.95
    assert np.mean(lengths) <= WebShopEnv.agent_defaults.max_actions_per_traj
    assert np.mean([n <= WebShopEnv.agent_defaults.max_actions_per_traj for n in lengths]) >= 0.95


def test_expert_think_is_grounded(env):
    move = env.expert()
    assert move.action.startswith("search[") and "goal:" in move.think
    env.step(move.action)
    move = env.expert()
    asin = move.action[len("click["):-1]
    product = next(p for p in env.results if p.asin.lower() == asin)
    assert product.title in move.think and f"${product.price:.2f}" in move.think


def test_expert_recovers_from_a_wrong_product(env):
    target = env.target
    other = next(p for p in env.catalog.products if p.category != target.category)
    _open_product(env, other.asin)
    assert env.expert().action == "click[< prev]"
    env.step("click[back to search]")
    for _ in range(env.max_steps):
        if env.done:
            break
        env.step(env.expert().action)
    assert env._score is not None and env._score.total == 1.0


# -- files ------------------------------------------------------------------------------------
def test_offline_data_round_trip(tmp_path):
    paths = write_offline_data(tmp_path)
    assert sorted(p.name for p in paths) == ["goals.jsonl", "products.json"]
    assert all(p.parent == tmp_path / "webshop" for p in paths)
    assert not list((tmp_path / "webshop").glob(".*"))  # no temp files left behind
    from_files = envs.make("webshop", data_path=tmp_path)
    in_memory = envs.make("webshop")
    assert from_files.catalog.products == in_memory.catalog.products
    assert from_files.catalog.goals == in_memory.catalog.goals
    assert from_files.reset(seed=9)[0] == in_memory.reset(seed=9)[0]
    first_100 = envs.make("webshop", data_path=tmp_path / "webshop", num_products=100).catalog
    assert len(first_100.products) == 100 and len(first_100.goals) == 300
    assert [g.goal_id for g in first_100.goals] == list(range(300))
    assert {g.asin for g in first_100.goals} == {p.asin for p in first_100.products}


def _webshop_files(folder):
    products = [
        {"asin": "B000SHIRT1", "name": "Acme Men's Long Sleeve Cotton Shirt", "category": "fashion",
         "query": "Men's Shirts ", "product_category": "Clothing › Men › Shirts", "pricing": "$24.99",
         "customization_options": {"Size": [{"value": "Small", "image": None}, {"value": "Large"}],
                                   "Color": [{"value": "Red/Blue"}, {"value": "Black"}]},
         "small_description": ["Machine wash", "Long sleeve"], "full_description": "A soft cotton shirt."},
        {"asin": "B000MUG001", "name": "Stoneware Coffee Mug", "category": "kitchen", "query": "mugs",
         "product_category": "Home › Kitchen › Mugs", "pricing": "$8.00 - $12.50",
         "customization_options": None, "small_description": "Dishwasher safe", "full_description": ""},
        {"asin": "nan", "name": "broken", "category": "x", "query": "x", "product_category": "x",
         "pricing": "", "customization_options": {}, "small_description": [], "full_description": ""},
        {"asin": "B000LAMP01", "name": "Desk Lamp", "category": "home", "query": "lamps",
         "product_category": "Home › Lighting", "customization_options": {"Color": None},
         "small_description": [], "full_description": "Bright."},
    ]
    instructions = {
        "B000SHIRT1": {"attributes": ["long sleeve", "cotton", "machine wash"],
                       "instruction": "i need a long sleeve cotton men's shirt.",
                       "instruction_attributes": ["long sleeve", "cotton"]},
        "B000MUG001": {"attributes": ["dishwasher safe"], "instruction": "i want a dishwasher safe mug",
                       "instruction_attributes": ["dishwasher safe"]},
    }
    (folder / "items_shuffle_4.json").write_text(json.dumps(products))
    (folder / "items_ins_v2_4.json").write_text(json.dumps(instructions))


def test_loader_maps_webshop_files(tmp_path):
    _webshop_files(tmp_path)
    catalog = load_catalog(tmp_path)
    assert [p.asin for p in catalog.products] == ["B000SHIRT1", "B000MUG001", "B000LAMP01"]
    shirt, mug, lamp = catalog.products
    assert shirt.title == "Acme Men's Long Sleeve Cotton Shirt" and shirt.query == "men's shirts"
    assert shirt.price == 24.99 and mug.price == 8.0 and lamp.price == 100.0
    assert shirt.options == (("size", ("small", "large")), ("color", ("red | blue", "black")))
    assert mug.options == () and lamp.options == ()
    assert shirt.attributes == ("long sleeve", "cotton", "machine wash") and mug.features == ("Dishwasher safe",)
    assert {g.asin for g in catalog.goals} == {"B000SHIRT1", "B000MUG001"}  # the lamp has no instruction
    shirt_goals = [g for g in catalog.goals if g.asin == "B000SHIRT1"]
    assert len(shirt_goals) == 3 and all(g.attributes == ("long sleeve", "cotton") for g in shirt_goals)
    goal = shirt_goals[0]
    assert goal.instruction.startswith("i need a long sleeve cotton men's shirt with size: ")
    assert goal.instruction.endswith(f"and price lower than {goal.price_upper:.2f} dollars")
    assert goal.price_upper in (30.0, 40.0, 50.0, 60.0)


def test_env_on_webshop_files_and_its_expert(tmp_path):
    _webshop_files(tmp_path)
    for split in ("train", "test"):
        env = envs.make("webshop", data_path=str(tmp_path), split=split)
        for seed in range(3):
            success, n = _expert_episode(env, seed)
            assert success and n <= 6


def test_missing_files_are_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="items_shuffle"):
        envs.make("webshop", data_path=tmp_path)
    with pytest.raises(ValueError, match="not a folder"):
        envs.make("webshop", data_path=tmp_path / "nowhere")


def test_parse_price():
    assert parse_price("$1,299.00") == 1299.0 and parse_price("$5.00 - $9.00") == 5.0
    assert parse_price([3.5, 2]) == 2.0 and parse_price("") is None and parse_price(None) is None
