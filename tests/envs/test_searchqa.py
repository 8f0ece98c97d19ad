"""Tests for the SearchQA environment (ragen2/envs/searchqa.py, ragen2/envs/searchqa_world.py)."""

from __future__ import annotations

import copy
import hashlib
import json
import pickle
import re

import pandas as pd
import pytest

from ragen2.envs.searchqa import (
    ACTIONS_LINE,
    DOC_CHARS,
    MAX_STEPS_LINE,
    NO_RESULTS,
    RESULTS_CHARS,
    SearchQAEnv,
    corpus_index,
    extract_answer,
    normalize_answer,
    score_answer,
    token_f1,
    write_offline_data,
)
from ragen2.envs.searchqa_world import OFFLINE_WORLD_VERSION, build_world, offline_world

WORLD_SHA256 = {1: "b32e9c78acfefcf9f2c7d312ec72a6a9a558a73c9c1b1977e7dcb1d75c2ba4da"}
"""OFFLINE_WORLD_VERSION -> sha256 of the world's repr (422 passages, 788 questions for version 1)."""

DOC_HEADER = re.compile(r"^\[Document (\d+)\] \(ID: ([^,]+), Score: (\d+\.\d{3})\)$")


@pytest.fixture(autouse=True)
def _offline_hf(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def _env_at(index: int, **kw) -> SearchQAEnv:
    env = SearchQAEnv(**kw)
    env.reset(options={"index": index})
    return env


def _first(kind: str, hops: int | None = None) -> int:
    questions = offline_world().questions
    return next(
        i for i, q in enumerate(questions) if q.kind == kind and (hops is None or len(q.hops) == hops)
    )


# -- the world -----------------------------------------------------------------------------------
def test_the_world_is_the_one_its_version_names():
    """Retrieval caches and the env version key on OFFLINE_WORLD_VERSION: an edit of data/searchqa_world.yaml (or of
    the drawing code) that changes the world must bump the version, and this test fails until it does."""
    world = build_world()
    digest = hashlib.sha256(repr(world).encode()).hexdigest()
    assert (len(world.passages), len(world.questions)) == (422, 788)
    assert digest == WORLD_SHA256[OFFLINE_WORLD_VERSION]


def test_every_question_chains_its_hops_from_the_data_file():
    """Each hop starts at the previous hop's answer, states its fact in the passage it names, and the question's
    answer is the last hop's; every kind the data file lists is asked."""
    world = build_world()
    text = {p.doc_id: p.text for p in world.passages}
    for q in world.questions:
        assert q.answer == q.hops[-1].answer
        for prev, hop in zip(q.hops, q.hops[1:]):
            assert prev.answer in hop.need
        for hop in q.hops:
            assert hop.answer in hop.fact
            assert hop.answer in text[hop.doc_id]
    kinds = {q.kind for q in world.questions}
    assert kinds == {"born", "born_country", "born_river", "city_country", "city_river", "city_capital", "capital",
                     "founder", "hq", "founder_born", "hq_country"}


# -- scoring -------------------------------------------------------------------------------------


def test_normalize_answer_squad_style():
    assert normalize_answer("  The Eiffel   Tower! ") == "eiffel tower"
    assert normalize_answer("An apple, a day") == "apple day"
    assert normalize_answer("Theater") == "theater"  # only whole-word articles go


@pytest.mark.parametrize(
    ("pred", "gold", "reward", "exact"),
    [
        ("the Eiffel Tower.", "Eiffel Tower", 1.0, True),
        ("Ana Ruiz", "Ruiz", 2 * 0.5 * 1 / 1.5, False),  # precision 1/2, recall 1
        ("Ruiz", "Ana Maria Ruiz", 0.5, False),  # precision 1, recall 1/3 -> F1 0.5
        ("a b c d e f g Ruiz", "Ruiz", 0.0, False),  # F1 = 0.25 < 0.3 -> 0
        ("yes", "no", 0.0, False),
        ("no", "no", 1.0, True),
        ("yes it is", "yes", 0.0, False),  # yes/no label mismatch zeroes F1
        ("", "Paris", 0.0, False),
    ],
)
def test_score_answer_cases(pred, gold, reward, exact):
    got_reward, got_exact, _ = score_answer(pred, [gold])
    assert got_reward == pytest.approx(reward) and got_exact == exact


def test_score_answer_takes_best_gold_and_f1_symmetry():
    assert score_answer("Paris", ["London", "paris"])[:2] == (1.0, True)
    assert token_f1("new york city", "york") == pytest.approx(token_f1("york", "new york city"))


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("I think it is \\boxed{Veltrana} overall.", "Veltrana"),
        ("The city is **Dorvel**, clearly.", "Dorvel"),
        ("After searching, the answer is Oskaria. Done.", "Oskaria"),
        ("Veltrana. It is on a river.", "Veltrana"),
        ("   ", ""),
    ],
)
def test_extract_answer(text, answer):
    assert extract_answer(text) == answer


# -- observations and actions --------------------------------------------------------------------


def test_initial_observation_format():
    env = SearchQAEnv()
    obs, info = env.reset(seed=3)
    question = offline_world().questions[3].question
    assert obs == f"Question: {question}\n{ACTIONS_LINE}" and info["index"] == 3


def test_search_observation_format_and_caps(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    rows = [{"id": f"d{i}", "contents": f"zebra {i} " + "filler words " * 200} for i in range(30)]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    questions = tmp_path / "q.parquet"
    pd.DataFrame(
        {"question": ["Which zebra?"], "ground_truth": ["zebra 3"], "data_source": ["t"]}
    ).to_parquet(questions)
    env = SearchQAEnv(data_path=questions, corpus_path=corpus, top_k=20)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("search[zebra]")
    assert (reward, terminated, truncated) == (0.0, False, False) and info["action_is_valid"]
    head, results_and_tail = obs.split("\n", 1)
    assert head == "Search results for 'zebra':"
    results, tail = results_and_tail.rsplit("\n\n", 1)
    assert tail == ACTIONS_LINE
    assert len(results) == RESULTS_CHARS  # 20 docs of 800 chars, cut to 4000
    headers = [DOC_HEADER.match(line) for line in results.split("\n") if line.startswith("[Document")]
    assert [int(m.group(1)) for m in headers] == list(range(1, len(headers) + 1))
    for block in results.split("\n[Document ")[:-1]:
        assert len(block.split("\n", 1)[1]) <= DOC_CHARS


def test_retrieval_finds_each_hop_passage():
    world = offline_world()
    index = corpus_index(("offline", OFFLINE_WORLD_VERSION))
    for question in world.questions[:200]:
        for hop in question.hops:
            found = [index.ids[pos] for pos, _ in index.search(hop.query, 5)]
            assert hop.doc_id in found, (hop.query, found)
        if len(question.hops) == 1:  # the bare question text also finds a one-hop question's passage
            assert question.hops[0].doc_id in [
                index.ids[pos] for pos, _ in index.search(question.question, 5)
            ]


def test_search_then_finish_gold_and_partial_credit():
    env = _env_at(_first("born"))
    hop = env._knowledge.hops[0]
    obs, *_ = env.step(f"search[{hop.query}]")
    assert hop.fact.split(" was born in ")[1].rstrip(".") in obs
    obs, reward, terminated, truncated, info = env.step(f"finish[{env._golds[0]}]")
    assert (reward, terminated, truncated, info["success"], info["action_is_valid"]) == (
        1.0,
        True,
        False,
        True,
        True,
    )
    person_env = _env_at(_first("founder"))
    gold = person_env._golds[0]  # "First Last"
    _, reward, terminated, _, info = person_env.step(f"finish[{gold.split()[1]}]")
    assert reward == pytest.approx(2 / 3) and terminated and info["success"] and not info["exact_match"]
    wrong_env = _env_at(_first("born"))
    assert wrong_env.step("finish[Atlantis]")[1:3] == (0.0, True)


def test_free_text_is_a_final_answer_flagged_invalid():
    env = _env_at(_first("capital"))
    gold = env._golds[0]
    obs, reward, terminated, truncated, info = env.step(f"I believe the answer is {gold}.")
    assert (reward, terminated, info["success"], info["action_is_valid"]) == (1.0, True, True, False)
    assert info["answer"] == gold


@pytest.mark.parametrize("action", ["", "   ", "search[]", "search[   ]", "finish[]", "FINISH[ ]"])
def test_empty_actions_are_invalid_and_change_nothing(action):
    env = SearchQAEnv()
    start, _ = env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step(action)
    assert (obs, reward, terminated, truncated) == (start, 0.0, False, False)
    assert not info["action_is_valid"] and not info["action_is_effective"]
    assert env._searches == 0


@pytest.mark.parametrize(
    ("action", "ends"),
    [
        ("search[", True),  # not a search (no closing bracket): a free-text final answer
        ("search[]]]", False),  # a search for "]]": valid, nothing matches
        ("search[" + "Veltrana " * 12_000 + "]", False),  # ~100k chars
        ("x" * 100_000, True),
        ("search[中文 √ é\u200b]", False),
        ("  Search[river]  ", False),
        ("finish[[nested]]", True),
    ],
)
def test_hostile_actions_never_raise(action, ends):
    env = SearchQAEnv()
    env.reset(seed=2)
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str) and len(obs) < RESULTS_CHARS + 1000
    assert terminated == ends and not truncated
    if action == "search[]]]":
        assert info["action_is_valid"] and NO_RESULTS in obs


@pytest.mark.parametrize("action", [None, 3, b"search[x]", ["finish[x]"]])
def test_non_string_actions_are_invalid(action):
    env = SearchQAEnv()
    start, _ = env.reset(seed=2)
    assert env.step(action)[:4] == (start, 0.0, False, False)


def test_max_steps_replaces_actions_line_and_truncates():
    env = SearchQAEnv(max_steps=3)
    env.reset(seed=0)
    for _ in range(2):
        assert env.step("search[river]")[0].endswith(ACTIONS_LINE)
    obs, reward, terminated, truncated, _ = env.step("search[river]")
    assert obs.endswith(MAX_STEPS_LINE) and ACTIONS_LINE not in obs and truncated and not terminated
    assert env.step("finish[x]")[4]["action_is_valid"] is False  # the episode is over


# -- expert, determinism, copies, speed ---------------------------------------------------------


def test_expert_succeeds_within_the_agent_budget():
    env = SearchQAEnv()
    budget = SearchQAEnv.agent_defaults.max_turns * SearchQAEnv.agent_defaults.max_actions_per_turn
    successes = grounded = 0
    two_hop_searches = []
    for seed in range(10_000, 10_100):
        env.reset(seed=seed)
        thinks = []
        for _ in range(budget):
            move = env.expert()
            thinks.append(move.think)
            _, _, terminated, truncated, info = env.step(move.action)
            if terminated or truncated:
                break
        successes += info["success"]
        grounded += not any("could not find" in t for t in thinks)
        if len(env._knowledge.hops) == 2:
            two_hop_searches.append(len(env._queries))
    assert successes >= 95 and grounded >= 95
    # Two-hop questions really take two searches (unless the first search happened to show both passages).
    assert sum(n >= 2 for n in two_hop_searches) >= 0.9 * len(two_hop_searches)


def test_expert_think_is_grounded():
    env = _env_at(_first("born_country", hops=2))
    first = env.expert()
    person = env._knowledge.hops[0].need.removeprefix("the birthplace of ")
    assert first.action == f"search[{person} born]" and person in first.think
    env.step(first.action)
    second = env.expert()
    assert env._knowledge.hops[0].fact in second.think and second.action.startswith("search[")
    env.step(second.action)
    final = env.expert()
    assert final.action == f"finish[{env._golds[0]}]" and env._knowledge.hops[1].fact in final.think


def test_seed_selects_question_modulo_n_and_is_deterministic():
    env = SearchQAEnv()
    n = env.num_questions()
    assert env.reset(seed=5)[0] == env.reset(seed=5 + n)[0]
    runs = []
    for _ in range(2):
        env = SearchQAEnv()
        env.reset(seed=42)
        runs.append([env.step(env.expert().action)[0] for _ in range(2)])
    assert runs[0] == runs[1]
    assert build_world() == offline_world()  # the world itself is a pure function of its seed


def test_hops_filter():
    assert {len(q.hops) for q in SearchQAEnv(hops=2)._offline_questions()} == {2}
    env = SearchQAEnv(hops=1)
    for seed in range(10):
        env.reset(seed=seed)
        assert len(env._knowledge.hops) == 1


def test_deepcopy_is_independent_and_shares_the_index():
    env = SearchQAEnv()
    env.reset(seed=7)
    branch = copy.deepcopy(env)
    branch.step(branch.expert().action)
    assert env._queries == [] and branch._queries != []
    assert len(pickle.dumps(env)) < 20_000  # no index or corpus inside the env
    assert corpus_index(env._corpus_key) is corpus_index(branch._corpus_key)



# -- arguments -----------------------------------------------------------------------------------


def test_bad_reset_index_names_the_value():
    with pytest.raises(ValueError, match="99999"):
        SearchQAEnv().reset(options={"index": 99_999})


# -- data files and the real loader --------------------------------------------------------------


def test_write_offline_data_round_trips_through_the_real_loader(tmp_path):
    paths = write_offline_data(tmp_path)
    assert [p.name for p in paths] == ["train.parquet", "corpus.jsonl"]
    assert sorted(p.name for p in (tmp_path / "searchqa").iterdir()) == ["corpus.jsonl", "train.parquet"]
    table = pd.read_parquet(paths[0])
    assert {"question", "ground_truth", "data_source"} <= set(table.columns)
    offline = SearchQAEnv()
    real = SearchQAEnv(data_path=paths[0], corpus_path=paths[1])
    assert real.num_questions() == offline.num_questions()
    successes = 0
    for seed in range(20):
        assert real.reset(seed=seed)[0] == offline.reset(seed=seed)[0]
        first = real.expert()
        assert first.action.startswith("search[")
        real.step(first.action)
        successes += real.step(real.expert().action)[4]["success"]
    assert successes == 20


def test_real_loader_with_list_answers_text_column_and_row_limit(tmp_path):
    corpus = tmp_path / "wiki.jsonl"
    docs = [
        '"Mount Kala"\nMount Kala is the tallest peak of Rindova.',
        '"Rindova"\nRindova is an island nation.',
    ]
    corpus.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    questions = tmp_path / "train.parquet"
    pd.DataFrame(
        {
            "question": ["What is the tallest peak of Rindova?", "unused"],
            "ground_truth": [["Mount Kala", "Kala"], ["x"]],
            "data_source": ["hotpotqa", "hotpotqa"],
        }
    ).to_parquet(questions)
    env = SearchQAEnv(data_path=questions, corpus_path=corpus, max_questions=1)
    assert env.num_questions() == 1
    env.reset(seed=7)
    obs, *_ = env.step(env.expert().action)
    assert "(ID: 0, Score:" in obs and "Mount Kala is the tallest" in obs
    move = env.expert()
    assert "mention Mount Kala" in move.think
    assert env.step("finish[kala]")[1] == 1.0  # any gold counts


def test_real_loader_rejects_bad_files(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "body": "no text column"}) + "\n", encoding="utf-8")
    questions = tmp_path / "q.parquet"
    pd.DataFrame({"question": ["q"], "answer": ["a"]}).to_parquet(questions)
    with pytest.raises(ValueError, match="ground_truth"):
        SearchQAEnv(data_path=questions, corpus_path=corpus)
    pd.DataFrame({"question": ["q"], "ground_truth": ["a"]}).to_parquet(questions)
    with pytest.raises(ValueError, match="'contents' or 'text'"):
        SearchQAEnv(data_path=questions, corpus_path=corpus)
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        SearchQAEnv(data_path=questions, corpus_path=tmp_path / "nope.jsonl")
    with pytest.raises(ValueError, match="hops=1"):
        SearchQAEnv(data_path=questions, corpus_path=corpus, hops=1)


def test_registry_and_docstring():
    from ragen2 import envs
    from ragen2.envs import searchqa as searchqa_module

    env = envs.make("searchqa", top_k=3)
    assert isinstance(env, SearchQAEnv) and env.top_k == 3
    for heading in ("Description", "Actions", "Observation", "Rewards", "Episode end", "Arguments"):
        assert f"## {heading}" in searchqa_module.__doc__
    assert "search[" in SearchQAEnv.instruction and "finish[" in SearchQAEnv.instruction
