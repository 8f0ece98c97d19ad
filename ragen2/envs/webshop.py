"""WebShop: buy the product an instruction describes in a text-mode online shop.

## Description

A shop simulator in the style of WebShop's text mode (docs/method.md §1.6). The agent reads a shopping
instruction ("i need a men's shirt that is long sleeve and cotton with size: large, and color: red,
and price lower than 40.00 dollars"), searches the catalog, pages through the results (10 per page,
at most 50), opens a product, picks its options (size, colour, ...) and clicks ``buy now``. Product
pages also link to ``Description`` and ``Features`` sub-pages. The catalog is a seeded synthetic one
(:mod:`ragen2.envs.webshop_catalog`) unless ``data_path`` points at files, either those written by
:func:`write_offline_data` or WebShop's own ``items_shuffle*.json`` / ``items_ins_v2*.json``.

## Actions

Free text, one of two forms (the name is matched case-insensitively):

- ``search[<query>]``: valid only on the search page (the only page with a search bar) and with a
  non-empty query; ranks products by BM25 over titles and attributes.
- ``click[<clickable>]``: valid only if the lower-cased target is one of the page's clickables
  (``back to search``, ``next >``, ``< prev``, a product id, an option value, ``description``,
  ``features``, ``buy now``).

Anything else (including actions longer than 4,096 characters) is invalid: the page does not change
and ``action_is_valid`` is False. Invalid actions still use up a step.

## Observation

The page text with `` [SEP] `` between elements, a line of shopping advice, then ``You must choose
from these actions:`` and the comma-separated available actions: ``search[<content>]`` where there is
a search bar, then ``click[<x>]`` for each clickable (no ``click[next >]`` on the last results page).

## Rewards

Zero until ``buy now``. On buying, the raw reward is WebShop's scheme: the number of goal attributes
the product has, plus the number of goal options chosen, plus 1 if the price is within the cap,
divided by (number of attributes + number of options + 1), times a type-match factor (1, 0.5, 0.1 or
0 from the product query, category breadcrumb and title-word overlap). With ``binary_reward=True``
(default) the reward is 1.0 if the raw reward is 1 and 0 otherwise; ``info["raw_reward"]`` always
carries the raw value. ``success`` is a raw reward of 1.

## Episode end

Terminated by ``buy now``. Truncated after ``max_steps`` steps (valid or not).

## Arguments

- ``num_products`` (int | None, default None): synthetic catalog size (None: 500); with ``data_path``,
  keep only the first ``num_products`` products (None: all).
- ``split`` ("train" | "val" | "test", default "train"): disjoint goal id ranges. ``reset(seed=s)``
  picks goal ``s mod n`` of the split; ``options={"goal_id": i}`` picks a goal id directly.
- ``data_path`` (str | Path | None, default None): folder with catalog files; None generates the
  catalog in memory (deterministic, cached per process).
- ``catalog_seed`` (int, default 0): seed of the synthetic catalog.
- ``binary_reward`` (bool, default True) and ``max_steps`` (int, default 15): see above.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from numbers import Integral
from pathlib import Path
from typing import Any, ClassVar

from ragen2.envs.base import AgentDefaults, ExpertMove, StepResult, TextEnv
from ragen2.envs.webshop_catalog import (
    RESULTS_PER_PAGE,
    Catalog,
    Goal,
    Product,
    load_catalog,
    synthetic_catalog,
    write_catalog,
)

MAX_ACTION_CHARS = 4096
SEP = " [SEP] "
ADVICE = (
    "Advice: you have a small budget of actions, so buy before it runs out; search with the product "
    "type and its features, not its size or colour; search at most 2 times; on the product page click "
    "each option the instruction asks for, then click buy now."
)
_ACTION_RE = re.compile(r"\s*(search|click)\[(.*)\]\s*", re.IGNORECASE | re.DOTALL)
_FILLER = frozenset("i i'm im need want looking for find me a an the that is are with and featuring".split())


# ---------------------------------------------------------------------------------------------
# Reward
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PurchaseScore:
    """The parts of WebShop's purchase reward; ``total`` is the raw reward in [0, 1]."""

    r_type: float
    attribute_matches: int
    option_matches: int
    price_ok: bool
    total: float


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _same_words(a: str, b: str) -> bool:
    """One phrase's word set contains the other's (WebShop uses a fuzzy token-set ratio > 85)."""
    wa, wb = _words(a), _words(b)
    return bool(wa and wb) and (wa <= wb or wb <= wa)


def type_match(bought: Product, target: Product) -> float:
    """1, 0.5, 0.1 or 0: WebShop's product-type factor (query, breadcrumb and title-word overlap)."""
    query_match = bool(bought.query) and bought.query == target.query
    levels = [{x.strip().lower() for x in p.product_category.split("›") if x.strip()} for p in (bought, target)]
    category_match = len(levels[0] & levels[1]) >= 2
    wanted = _words(target.title)
    title_score = len(_words(bought.title) & wanted) / len(wanted) if wanted else 0.2
    if title_score == 0.0:
        return 0.0
    if title_score < 0.1:
        return 0.1
    return 1.0 if (query_match or category_match or title_score > 0.2) else 0.5


def purchase_score(bought: Product, target: Product, goal: Goal, chosen: dict[str, str]) -> PurchaseScore:
    """Score buying ``bought`` with options ``chosen`` against ``goal`` (whose product is ``target``)."""
    text = bought.text
    attr_matches = sum(
        any(_same_words(a, g) for a in bought.attributes) or g.lower() in text for g in goal.attributes
    )
    offered = bought.option_map
    option_matches = 0
    for name, value in goal.options:
        if name in offered:  # chosen from a menu: compared exactly after normalisation
            option_matches += " ".join(chosen.get(name, "").lower().split()) == " ".join(value.lower().split())
        else:
            option_matches += value.lower() in text
    price_ok = bought.price <= goal.price_upper
    r_type = type_match(bought, target)
    total = r_type * (attr_matches + option_matches + price_ok) / (len(goal.attributes) + len(goal.options) + 1)
    return PurchaseScore(r_type, int(attr_matches), int(option_matches), bool(price_ok), float(total))


# ---------------------------------------------------------------------------------------------
# The environment
# ---------------------------------------------------------------------------------------------
class WebShopEnv(TextEnv):
    """Text-mode shop: search, browse, choose options and buy (see the module docstring)."""

    name: ClassVar[str] = "webshop"
    instruction: ClassVar[str] = (
        "You are shopping in an online store. Buy the product that best matches the instruction: search "
        "for it, open a matching product from the results, click the options the instruction asks for "
        "(for example size and colour), then click buy now. Only use the actions listed in the state, "
        "written as search[your query] or click[item]. Example: <answer>search[men's shirt long "
        "sleeve]</answer>"
    )
    agent_defaults: ClassVar[AgentDefaults] = AgentDefaults(
        max_turns=9, max_actions_per_turn=1, max_actions_per_traj=9, max_tokens_hint=200
    )

    def __init__(
        self,
        *,
        num_products: int | None = None,
        split: str = "train",
        data_path: str | Path | None = None,
        catalog_seed: int = 0,
        binary_reward: bool = True,
        max_steps: int = 15,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        if num_products is not None and (isinstance(num_products, bool) or not isinstance(num_products, int)
                                         or num_products < 1):
            raise ValueError(f"num_products must be a positive int or None, got {num_products!r}")
        if split not in ("train", "val", "test"):
            raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
        if isinstance(catalog_seed, bool) or not isinstance(catalog_seed, int) or catalog_seed < 0:
            raise ValueError(f"catalog_seed must be a non-negative int, got {catalog_seed!r}")
        if not isinstance(binary_reward, bool):
            raise ValueError(f"binary_reward must be a bool, got {binary_reward!r}")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
        if data_path is None:
            self.catalog: Catalog = synthetic_catalog(500 if num_products is None else num_products, catalog_seed)
        elif isinstance(data_path, (str, Path)):
            self.catalog = load_catalog(data_path, num_products)
        else:
            raise ValueError(f"data_path must be a str, Path or None, got {data_path!r}")
        self.split = split
        self.binary_reward = binary_reward
        self.max_steps = max_steps
        self._goal_ids = self.catalog.split_goal_ids(split)
        self._seed: int | None = None
        self.goal: Goal | None = None
        self.target: Product | None = None

    # -- state -------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._seed = seed
        return super().reset(seed=seed, options=options)

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if "goal_id" in options:
            goal_id = options["goal_id"]
            if isinstance(goal_id, bool) or not isinstance(goal_id, Integral) or goal_id not in set(self._goal_ids):
                raise ValueError(f"goal_id {goal_id!r} is not a goal id of the {self.split!r} split")
        elif self._seed is not None:
            goal_id = int(self._goal_ids[self._seed % len(self._goal_ids)])
        else:
            goal_id = int(self._goal_ids[int(self.np_random.integers(len(self._goal_ids)))])
        self.goal = self.catalog.goals[int(goal_id)]
        self.target = self.catalog.product(self.goal.asin)
        self.page = "search"  # search | results | item | description | features | done
        self.results: list[Product] = []
        self.page_no = 1
        self.item: Product | None = None
        self.chosen: dict[str, str] = {}
        self.steps = 0
        self.searches = 0
        self._perfect: dict[str, bool] = {}
        self._raw, self._score = 0.0, None
        info = {"goal_id": int(goal_id), "split": self.split, "instruction": self.goal.instruction}
        return self._observation(), info

    def _state_key(self) -> tuple:
        return (self.page, self.page_no, self.item.asin if self.item else None,
                tuple(sorted(self.chosen.items())), tuple(p.asin for p in self.results))

    # -- pages -------------------------------------------------------------------------------
    @property
    def _last_page(self) -> int:
        return max(1, -(-len(self.results) // RESULTS_PER_PAGE))

    def _visible_results(self) -> list[Product]:
        start = (self.page_no - 1) * RESULTS_PER_PAGE
        return self.results[start:start + RESULTS_PER_PAGE]

    def clickables(self) -> list[str]:
        """Lower-cased clickable elements of the current page, in page order."""
        if self.page in ("search", "done"):
            return []
        if self.page == "results":
            items = ["back to search"] + (["< prev"] if self.page_no > 1 else [])
            items += ["next >"] if self.page_no < self._last_page else []
            return items + [p.asin.lower() for p in self._visible_results()]
        if self.page == "item":
            values = [v.lower() for _, vals in self.item.options for v in vals]
            return ["back to search", "< prev", *dict.fromkeys(values), "description", "features", "buy now"]
        return ["back to search", "< prev"]

    def available_actions(self) -> list[str]:
        """The action list shown in the observation."""
        search = ["search[<content>]"] if self.page == "search" else []
        return search + [f"click[{c}]" for c in self.clickables()]

    def _page_text(self) -> str:
        head = f"Instruction:{SEP}{self.goal.instruction}{SEP}Back to Search"
        if self.page == "search":
            return f"WebShop{SEP}Instruction:{SEP}{self.goal.instruction}{SEP}Search"
        if self.page == "done":
            return f"Thank you for shopping with us!{SEP}Your score (min 0.0, max 1.0){SEP}{self._raw:.2f}"
        if self.page == "results":
            parts = [head, f"Page {self.page_no} (Total results: {len(self.results)})"]
            parts += ["< Prev"] if self.page_no > 1 else []
            parts += ["Next >"] if self.page_no < self._last_page else []
            for p in self._visible_results():
                parts += [p.asin, p.title, f"${p.price:.2f}"]
            return SEP.join(parts)
        item = self.item
        if self.page == "item":
            parts = [head, "< Prev"]
            for name, values in item.options:
                parts += [name, *values]
            if self.chosen:
                parts.append("Selected: " + ", ".join(f"{k}: {v}" for k, v in self.chosen.items()))
            parts += [item.title, f"Price: ${item.price:.2f}", "Rating: N.A.", "Description", "Features", "Buy Now"]
            return SEP.join(parts)
        body = [item.description] if self.page == "description" else list(item.features)
        return SEP.join([head, "< Prev", *body])

    def _observation(self) -> str:
        actions = ", ".join(self.available_actions())
        return f"{self._page_text()}\n{ADVICE}\nYou must choose from these actions: {actions}"

    # -- dynamics ----------------------------------------------------------------------------
    def _step(self, action: str) -> StepResult:
        self.steps += 1
        before = self._state_key()
        valid, reward, terminated, info = self._apply(action), 0.0, False, {}
        if self.page == "done":
            terminated = True
            reward = float(self._raw >= 1.0) if self.binary_reward else self._raw
            info = {"raw_reward": self._raw, "bought": self.item.asin, **asdict(self._score)}
        truncated = not terminated and self.steps >= self.max_steps
        success = terminated and self._raw >= 1.0
        return StepResult(self._observation(), reward, terminated, truncated, success, valid,
                          valid and self._state_key() != before, info)

    def _apply(self, action: str) -> bool:
        """Carry out ``action`` if it is valid on this page; returns whether it was."""
        match = _ACTION_RE.fullmatch(action) if len(action) <= MAX_ACTION_CHARS else None
        if match is None:
            return False
        kind, arg = match.group(1).lower(), match.group(2).strip()
        if kind == "search":
            if self.page != "search" or not arg:
                return False
            self.searches += 1
            self.results, self.page_no, self.page = self.catalog.search(arg), 1, "results"
            return True
        target = arg.lower()
        if target not in self.clickables():
            return False
        if target == "back to search":
            self.page, self.results, self.item, self.chosen = "search", [], None, {}
        elif self.page == "results":
            if target in ("next >", "< prev"):
                self.page_no += 1 if target == "next >" else -1
            else:
                self.item = next(p for p in self._visible_results() if p.asin.lower() == target)
                self.page, self.chosen = "item", {}
        elif self.page == "item":
            if target == "< prev":
                self.page, self.item, self.chosen = "results", None, {}
            elif target in ("description", "features"):
                self.page = target
            elif target == "buy now":
                self._score = purchase_score(self.item, self.target, self.goal, self.chosen)
                self._raw, self.page = self._score.total, "done"
            else:
                name = next(n for n, vals in self.item.options if target in (v.lower() for v in vals))
                self.chosen[name] = next(v for v in self.item.option_map[name] if v.lower() == target)
        else:  # description / features: "< prev" returns to the product
            self.page = "item"
        return True

    # -- expert ------------------------------------------------------------------------------
    def _goal_keywords(self) -> str:
        """Search words read off the instruction: its text before the options and price, minus filler."""
        text = self.goal.instruction
        cut = [text.find(f" with {self.goal.options[0][0]}:")] if self.goal.options else []
        cut += [text.find(", and price lower than")]
        ends = [i for i in cut if i > 0]
        words = re.findall(r"[a-z0-9][a-z0-9'.\-]*", text[: min(ends)] if ends else text, flags=re.I)
        return " ".join(w for w in words if w.lower() not in _FILLER)

    def _summary(self) -> str:
        opts = ", ".join(v for _, v in self.goal.options)
        return f"{self._goal_keywords()}{', ' + opts if opts else ''}, under ${self.goal.price_upper:.2f}"

    def _goal_choice(self, product: Product) -> dict[str, str]:
        offered = product.option_map
        return {n: v for n, v in self.goal.options if v in offered.get(n, ())}

    def is_perfect(self, product: Product) -> bool:
        """Whether buying ``product`` with the goal's options earns the full reward."""
        if product.asin not in self._perfect:
            score = purchase_score(product, self.target, self.goal, self._goal_choice(product))
            self._perfect[product.asin] = score.total >= 1.0
        return self._perfect[product.asin]

    def expert(self) -> ExpertMove:
        """Search with the instruction's key words, open a product that fully matches, set options, buy."""
        if self.goal is None:
            raise RuntimeError("WebShopEnv.expert() called before reset()")
        goal = f"goal: {self._summary()}."
        if self.page == "done":
            return ExpertMove("click[buy now]", "the purchase is done; nothing left to do.")
        if self.page == "search":
            query = self._goal_keywords() if self.searches == 0 else self.target.title
            return ExpertMove(f"search[{query}]", f"{goal} search for the type and features: {query}")
        if self.page == "results":
            for p in self._visible_results():
                if self.is_perfect(p):
                    return ExpertMove(f"click[{p.asin.lower()}]",
                                      f"{goal} {p.asin} {p.title} ${p.price:.2f} matches. click it")
            if self.page_no < self._last_page:
                return ExpertMove("click[next >]", f"{goal} nothing on page {self.page_no} matches. next page")
            return ExpertMove("click[back to search]", f"{goal} no result matches. search again")
        if self.page in ("description", "features"):
            return ExpertMove("click[< prev]", f"{goal} back to the product page to choose options")
        item = self.item
        if not self.is_perfect(item):
            return ExpertMove("click[< prev]", f"{goal} {item.title} does not match. go back to the results")
        for name, value in self._goal_choice(item).items():
            if self.chosen.get(name) != value:
                now = self.chosen.get(name, "not chosen")
                return ExpertMove(f"click[{value.lower()}]", f"{goal} {name} is {now}, need {value}. click {value}")
        return ExpertMove("click[buy now]",
                          f"{goal} {item.title} ${item.price:.2f} with the right options. buy now")


def write_offline_data(root: Path) -> list[Path]:
    """Write the default synthetic catalog and its goals to ``root/webshop/`` (atomically)."""
    return write_catalog(synthetic_catalog(500, 0), Path(root) / "webshop")
