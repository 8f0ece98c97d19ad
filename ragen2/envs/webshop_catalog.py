"""The product catalog and shopping goals behind :mod:`ragen2.envs.webshop`.

A :class:`Catalog` holds immutable :class:`Product` and :class:`Goal` records and answers BM25
searches over product titles and attributes. It comes from one of three sources:

- :func:`synthetic_catalog`: a seeded, generated catalog (twelve product types, made-up brands,
  attributes, options and prices) with goals derived from its products; built in memory.
- :func:`load_catalog` on a folder written by :func:`write_catalog` (``products.json`` and
  ``goals.jsonl``), the inspectable offline copy of a generated catalog.
- :func:`load_catalog` on a folder with WebShop's own files (``items_shuffle*.json`` products,
  optionally ``items_ins_v2*.json`` instruction attributes), mapped onto the same records.

Catalogs and their search indexes are cached per process and shared (never deep-copied) by every
environment that uses them.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ragen2.fileio import write_text_atomic

#: Results a search returns (WebShop keeps the top 50) and results shown per page.
SEARCH_RETURN_N = 50
RESULTS_PER_PAGE = 10

_STOPWORDS = frozenset(
    "a an and are as at be by for from i in is it its looking me my need of on or s that the this to "
    "with want would like you your find buy".split()
)


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens without stopwords, with a plural ``s`` stripped (for search)."""
    words = re.findall(r"[a-z0-9]+(?:\.[0-9]+)?", text.lower())
    return [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
            for w in words if w not in _STOPWORDS]


@dataclass(frozen=True)
class Product:
    """One product. ``options`` is a tuple of ``(option name, allowed values)`` pairs."""

    asin: str
    title: str
    category: str
    query: str
    product_category: str
    price: float
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]
    description: str
    features: tuple[str, ...]

    def __deepcopy__(self, memo: dict) -> Product:
        return self  # immutable

    @property
    def option_map(self) -> dict[str, tuple[str, ...]]:
        return dict(self.options)

    @property
    def text(self) -> str:
        """Title, features and description, lower-cased (for attribute and option fallbacks)."""
        return " ".join((self.title, *self.features, self.description)).lower()


@dataclass(frozen=True)
class Goal:
    """A shopping instruction derived from the target product ``asin``."""

    goal_id: int
    asin: str
    instruction: str
    attributes: tuple[str, ...]
    options: tuple[tuple[str, str], ...]
    price_upper: float

    def __deepcopy__(self, memo: dict) -> Goal:
        return self  # immutable


@dataclass(frozen=True, eq=False)
class Catalog:
    """Products, goals and a process-wide cached BM25 index; shared, never deep-copied."""

    key: str
    products: tuple[Product, ...]
    goals: tuple[Goal, ...]

    def __post_init__(self):
        object.__setattr__(self, "_by_asin", {p.asin: p for p in self.products})

    def __deepcopy__(self, memo: dict) -> Catalog:
        return self  # immutable and shared

    def __repr__(self) -> str:
        return f"Catalog({self.key!r}, {len(self.products)} products, {len(self.goals)} goals)"

    def product(self, asin: str) -> Product:
        return self._by_asin[asin]

    def search(self, query: str) -> list[Product]:
        """The (up to) :data:`SEARCH_RETURN_N` best BM25 matches with a positive score, best first."""
        tokens = tokenize(query)
        if not tokens:
            return []
        scores = _bm25_index(self).get_scores(tokens)
        order = np.argsort(-scores, kind="stable")[:SEARCH_RETURN_N]
        return [self.products[i] for i in order if scores[i] > 0]

    def split_goal_ids(self, split: str) -> np.ndarray:
        """Goal ids of ``split``: disjoint slices of a fixed permutation of all goal ids.

        With at least 3,000 goals the slice sizes are the reference's (test 500, val 1,000, train the
        rest); smaller catalogs use 10 % / 10 % / 80 %.
        """
        n = len(self.goals)
        order = np.random.default_rng(42).permutation(n)
        n_test, n_val = (500, 1000) if n >= 3000 else (max(1, n // 10), max(1, n // 10))
        bounds = {"test": (0, n_test), "val": (n_test, n_test + n_val), "train": (n_test + n_val, n)}
        if split not in bounds:
            raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
        lo, hi = bounds[split]
        if hi <= lo:
            raise ValueError(f"catalog {self.key!r} has too few goals ({n}) for a {split!r} split")
        return order[lo:hi]


_INDEXES: dict[str, Any] = {}


def _bm25_index(catalog: Catalog):
    """The BM25 index of ``catalog`` (built once per process per catalog key)."""
    index = _INDEXES.get(catalog.key)
    if index is None:
        import bm25s

        index = bm25s.BM25()
        docs = [tokenize(" ".join((p.title, *p.attributes))) or ["_"] for p in catalog.products]
        index.index(docs, show_progress=False)
        _INDEXES[catalog.key] = index
    return index


# ---------------------------------------------------------------------------------------------
# The synthetic world
# ---------------------------------------------------------------------------------------------
_COLORS = ("black", "white", "navy blue", "red", "heather grey", "olive green", "burgundy", "pink", "beige")
_APPAREL = ("x-small", "small", "medium", "large", "x-large", "xx-large")

# category: (breadcrumb, query, goal noun, title noun, attribute pool, option pools, price range)
_TYPES: dict[str, tuple[str, str, str, str, tuple[str, ...], dict[str, tuple[str, ...]], tuple[int, int]]] = {
    "shirts": ("Clothing › Men › Shirts", "men's shirts", "men's shirt", "Men's Shirt",
               ("long sleeve", "short sleeve", "cotton", "slim fit", "button closure", "wrinkle free",
                "machine wash"), {"size": _APPAREL[1:], "color": _COLORS}, (12, 60)),
    "dresses": ("Clothing › Women › Dresses", "women's dresses", "women's dress", "Women's Dress",
                ("floral print", "v-neck", "midi length", "side pockets", "short sleeve", "machine wash",
                 "a-line"), {"size": _APPAREL[:5], "color": _COLORS}, (20, 90)),
    "sneakers": ("Clothing › Shoes › Sneakers", "running sneakers", "running sneaker", "Running Sneakers",
                 ("rubber sole", "lace up", "breathable mesh", "lightweight", "non slip", "memory foam",
                  "arch support"), {"size": ("7", "7.5", "8", "8.5", "9", "9.5", "10", "11", "12"),
                                    "color": _COLORS[:6]}, (30, 140)),
    "mugs": ("Home & Kitchen › Kitchen › Mugs", "coffee mugs", "coffee mug", "Coffee Mug",
             ("ceramic", "dishwasher safe", "microwave safe", "gift box", "handmade", "large handle"),
             {"color": ("white", "black", "matte blue", "speckled green", "terracotta")}, (8, 30)),
    "headphones": ("Electronics › Audio › Headphones", "wireless headphones", "wireless headphone",
                   "Wireless Headphones",
                   ("noise cancelling", "over ear", "built-in microphone", "long battery life", "foldable",
                    "fast charging", "bluetooth 5.3"), {"color": ("black", "white", "silver", "rose gold")},
                   (20, 250)),
    "backpacks": ("Luggage › Backpacks › Laptop Backpacks", "laptop backpacks", "laptop backpack",
                  "Laptop Backpack",
                  ("water resistant", "usb charging port", "padded straps", "anti theft", "large capacity",
                   "luggage strap"), {"size": ("15.6 inch", "17 inch"), "color": _COLORS[:5]}, (20, 80)),
    "lamps": ("Home & Kitchen › Lighting › Desk Lamps", "led desk lamps", "led desk lamp", "LED Desk Lamp",
              ("dimmable", "usb charging port", "touch control", "eye caring", "adjustable arm",
               "remote control"), {"color": ("black", "white", "silver", "wood grain")}, (15, 70)),
    "phone cases": ("Electronics › Cell Phones › Cases", "phone cases", "phone case", "Phone Case",
                    ("shockproof", "slim", "wireless charging compatible", "raised edges", "clear back",
                     "kickstand"), {"model": ("iphone 13", "iphone 14", "iphone 14 pro", "iphone 15",
                                              "iphone 15 pro max", "galaxy s23"),
                                    "color": ("clear", "black", "purple", "mint", "red")}, (6, 30)),
    "watches": ("Electronics › Wearables › Smart Watches", "smart watches", "smart watch", "Smart Watch",
                ("heart rate monitor", "sleep tracking", "waterproof", "gps", "long battery life",
                 "touch screen"), {"size": ("small", "large"), "color": ("black", "silver", "pink", "blue")},
                (30, 300)),
    "pillow covers": ("Home & Kitchen › Bedding › Pillow Covers", "throw pillow covers", "throw pillow cover",
                      "Throw Pillow Cover",
                      ("linen", "zipper closure", "machine wash", "double sided", "soft velvet", "decorative"),
                      {"size": ("16x16 inch", "18x18 inch", "20x20 inch"), "color": _COLORS}, (8, 35)),
    "yoga mats": ("Sports & Outdoors › Fitness › Yoga Mats", "yoga mats", "yoga mat", "Yoga Mat",
                  ("non slip", "extra thick", "eco friendly", "carrying strap", "tpe", "alignment lines"),
                  {"size": ("standard", "extra long"), "color": ("purple", "black", "teal", "pink", "grey")},
                  (15, 60)),
    "serums": ("Beauty › Skin Care › Serums", "face serums", "face serum", "Face Serum",
               ("hyaluronic acid", "vitamin c", "fragrance free", "cruelty free", "paraben free",
                "anti aging"), {"size": ("1 fl oz", "2 fl oz")}, (10, 50)),
}
_BRANDS = ("Alder", "Birchwood", "Cobalt", "Dunmore", "Emberly", "Fablecraft", "Granite & Co", "Harborline",
           "Irisa", "Juniper", "Kestrel", "Lumenra", "Maplewood", "Nimbus", "Orchidia", "Pebblestone",
           "Quillon", "Ravenna", "Sablo", "Tundra", "Umberto", "Vesper", "Willowby", "Yarrow", "Zephra")


def _asin(rng: np.random.Generator) -> str:
    chars = np.array(list("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"))
    return "B0" + "".join(rng.choice(chars, size=8))


def _generate_product(rng: np.random.Generator, asin: str) -> Product:
    category = list(_TYPES)[int(rng.integers(len(_TYPES)))]
    breadcrumb, query, _noun, title_noun, attr_pool, option_pools, (lo, hi) = _TYPES[category]
    n_attr = int(rng.integers(3, 5))
    attributes = tuple(attr_pool[i] for i in sorted(rng.choice(len(attr_pool), n_attr, replace=False)))
    options = []
    for name, pool in option_pools.items():
        k = int(rng.integers(2, min(5, len(pool)) + 1))
        options.append((name, tuple(pool[i] for i in sorted(rng.choice(len(pool), k, replace=False)))))
    brand = _BRANDS[int(rng.integers(len(_BRANDS)))]
    title_attrs = " ".join(a.title() for a in attributes[:2])
    title = f"{brand} {title_attrs} {title_noun}"
    price = float(int(rng.uniform(lo, hi))) + 0.99
    description = (f"The {brand} {title_noun.lower()} is {', '.join(attributes[:-1])} and {attributes[-1]}. "
                   f"Backed by a 30-day return policy.")
    features = tuple(f"{a.capitalize()} for everyday use" for a in attributes)
    return Product(asin, title, category, query, breadcrumb, price, attributes, tuple(options),
                   description, features)


def price_cap(price: float, rng: np.random.Generator) -> float:
    """WebShop's goal price cap: the larger of two of the first four multiples of 10 above ``price``."""
    above = [10.0 * i for i in range(1, 100) if 10.0 * i > price][:4]
    if len(above) < 2:
        return 1_000_000.0
    return float(max(rng.choice(above, size=2, replace=False)))


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _goal_text(noun: str, attrs: list[str], options: list[tuple[str, str]], cap: float, style: int) -> str:
    opts = ", and ".join(f"{k}: {v}" for k, v in options)
    price = f"price lower than {cap:.2f} dollars"
    if style == 0:
        text = f"i need {_article(noun)} {noun} that is {_join(attrs)}"
    elif style == 1:
        text = f"i'm looking for {_article(attrs[0])} {_join(attrs)} {noun}"
    else:
        text = f"find me {_article(noun)} {noun} featuring {_join(attrs)}"
    return f"{text}{' with ' + opts if opts else ''}, and {price}"


def _synthetic_goals(products: tuple[Product, ...], rng: np.random.Generator, per_product: int) -> list[Goal]:
    goals: list[Goal] = []
    for product in products:
        noun = _TYPES[product.category][2]
        for _ in range(per_product):
            k = int(rng.integers(2, min(3, len(product.attributes)) + 1))
            attrs = [product.attributes[i] for i in sorted(rng.choice(len(product.attributes), k, replace=False))]
            options = [(name, values[int(rng.integers(len(values)))]) for name, values in product.options]
            cap = price_cap(product.price, rng)
            text = _goal_text(noun, attrs, options, cap, int(rng.integers(3)))
            goals.append(Goal(len(goals), product.asin, text, tuple(attrs), tuple(options), cap))
    return goals


@lru_cache(maxsize=8)
def synthetic_catalog(num_products: int = 500, seed: int = 0, goals_per_product: int = 3) -> Catalog:
    """The seeded synthetic catalog (cached per process; same arguments, same catalog)."""
    if isinstance(num_products, bool) or not isinstance(num_products, int) or not 10 <= num_products <= 20000:
        raise ValueError(f"num_products must be an int in [10, 20000], got {num_products!r}")
    rng = np.random.default_rng([seed, 20_600])
    products, seen = [], set()
    while len(products) < num_products:
        asin = _asin(rng)
        if asin not in seen:
            seen.add(asin)
            products.append(_generate_product(rng, asin))
    goals = _synthetic_goals(tuple(products), rng, goals_per_product)
    return Catalog(f"synthetic:{num_products}:{seed}:{goals_per_product}", tuple(products), tuple(goals))


# ---------------------------------------------------------------------------------------------
# Files: our offline copy and WebShop's own product/instruction files
# ---------------------------------------------------------------------------------------------
def write_catalog(catalog: Catalog, folder: Path) -> list[Path]:
    """Write ``catalog`` as ``folder/products.json`` and ``folder/goals.jsonl`` (atomically)."""
    products = [{**asdict(p), "options": {k: list(v) for k, v in p.options}} for p in catalog.products]
    goals = "".join(json.dumps({**asdict(g), "options": dict(g.options)}) + "\n" for g in catalog.goals)
    return [write_text_atomic(folder / "products.json", json.dumps(products, indent=1) + "\n"),
            write_text_atomic(folder / "goals.jsonl", goals)]


def _read_own_files(folder: Path) -> tuple[list[Product], list[Goal]]:
    products = []
    for d in json.loads((folder / "products.json").read_text(encoding="utf-8")):
        products.append(Product(**{**d, "attributes": tuple(d["attributes"]), "features": tuple(d["features"]),
                                   "options": tuple((k, tuple(v)) for k, v in d["options"].items())}))
    goals = []
    for line in (folder / "goals.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            goals.append(Goal(**{**d, "attributes": tuple(d["attributes"]),
                                 "options": tuple(d["options"].items())}))
    return products, goals


def parse_price(pricing: Any) -> float | None:
    """The lowest price in a WebShop ``pricing``/``Price`` value (``"$12.99"``, ``"$5 - $9"``, list)."""
    if isinstance(pricing, (int, float)) and not isinstance(pricing, bool):
        return float(pricing)
    if isinstance(pricing, (list, tuple)):
        values = [v for v in (parse_price(x) for x in pricing) if v is not None]
        return min(values) if values else None
    if isinstance(pricing, str):
        values = [float(m.replace(",", "")) for m in re.findall(r"\d[\d,]*(?:\.\d+)?", pricing)]
        return min(values) if values else None
    return None


def _webshop_product(raw: dict[str, Any], attributes: list[str]) -> Product | None:
    asin = str(raw.get("asin", ""))
    if not asin or asin == "nan" or len(asin) > 10:
        return None
    options = []
    raw_options = raw.get("customization_options") or raw.get("options") or {}
    for name, contents in raw_options.items():
        if not contents:
            continue
        values = [(c.get("value", "") if isinstance(c, dict) else str(c)) for c in contents]
        values = [v.strip().replace("/", " | ").lower() for v in values if v and v.strip()]
        if values:
            options.append((name.lower(), tuple(dict.fromkeys(values))))
    bullets = raw.get("small_description") or raw.get("BulletPoints") or []
    bullets = [bullets] if isinstance(bullets, str) else [str(b) for b in bullets]
    price = parse_price(raw.get("pricing") or raw.get("Price"))
    return Product(asin=asin, title=str(raw.get("name") or raw.get("Title") or ""),
                   category=str(raw.get("category", "")), query=str(raw.get("query", "")).lower().strip(),
                   product_category=str(raw.get("product_category", "")),
                   price=100.0 if price is None else price,  # WebShop's default for a missing price
                   attributes=tuple(attributes or raw.get("Attributes") or ()), options=tuple(options),
                   description=str(raw.get("full_description") or raw.get("Description") or ""),
                   features=tuple(bullets))


def _webshop_goals(products: list[Product], instructions: dict[str, Any], per_product: int) -> list[Goal]:
    """WebShop-style synthetic goals: the product's instruction plus sampled options and a price cap."""
    rng = np.random.default_rng(42)
    goals: list[Goal] = []
    for product in products:
        entry = instructions.get(product.asin) or {}
        text, attrs = entry.get("instruction"), entry.get("instruction_attributes")
        if not text or not attrs:
            continue
        names = [name for name, _ in product.options]
        combos = list(itertools.islice(itertools.product(*(v for _, v in product.options)), 10_000))
        picks = rng.choice(len(combos), size=min(per_product, len(combos)), replace=False)
        for pick in sorted(picks):
            options = tuple(zip(names, combos[pick]))
            cap = price_cap(product.price, rng)
            opts = ", and ".join(f"{k}: {v}" for k, v in options)
            price = f", and price lower than {cap:.2f} dollars" if cap < 1_000_000 else ""
            instruction = f"{text.strip().rstrip('.')}{' with ' + opts if opts else ''}{price}"
            goals.append(Goal(len(goals), product.asin, instruction, tuple(attrs), options, cap))
    return goals


def _read_webshop_files(folder: Path, num_products: int | None, per_product: int):
    product_files = sorted(folder.glob("items_shuffle*.json"))
    raw_products = json.loads(product_files[0].read_text(encoding="utf-8"))
    ins_files = sorted(folder.glob("items_ins_v2*.json"))
    instructions = json.loads(ins_files[0].read_text(encoding="utf-8")) if ins_files else {}
    if num_products is not None:
        raw_products = raw_products[:num_products]
    products, seen = [], set()
    for raw in raw_products:
        attrs = (instructions.get(str(raw.get("asin"))) or {}).get("attributes") or []
        product = _webshop_product(raw, attrs)
        if product is not None and product.asin not in seen:
            seen.add(product.asin)
            products.append(product)
    return products, _webshop_goals(products, instructions, per_product)


def load_catalog(path: str | os.PathLike, num_products: int | None = None, goals_per_product: int = 3) -> Catalog:
    """Load a catalog from ``path`` (or ``path/webshop``): our own files or WebShop's (cached)."""
    folder = Path(path).expanduser().resolve()
    if (folder / "webshop").is_dir():
        folder = folder / "webshop"
    if not folder.is_dir():
        raise ValueError(f"data_path {str(path)!r} is not a folder")
    files = sorted(folder.glob("products.json")) + sorted(folder.glob("items_shuffle*.json"))
    if not files:
        raise ValueError(f"no products.json or items_shuffle*.json in {str(folder)!r}")
    stamp = tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in sorted(folder.glob("*.json*")))
    return _load_cached(str(folder), stamp, num_products, goals_per_product)


@lru_cache(maxsize=8)
def _load_cached(folder_name: str, stamp: tuple, num_products: int | None, per_product: int) -> Catalog:
    folder = Path(folder_name)
    if (folder / "products.json").exists():
        products, goals = _read_own_files(folder)
        if num_products is not None:
            products = products[:num_products]
            kept = {p.asin for p in products}
            goals = [replace(g, goal_id=i) for i, g in enumerate(g for g in goals if g.asin in kept)]
    else:
        products, goals = _read_webshop_files(folder, num_products, per_product)
    if not products or not goals:
        raise ValueError(f"catalog in {folder_name!r} has {len(products)} products and {len(goals)} goals")
    digest = hashlib.sha1(repr(stamp).encode()).hexdigest()[:12]
    key = f"files:{folder_name}:{digest}:{num_products}:{per_product}"
    return Catalog(key, tuple(products), tuple(goals))
