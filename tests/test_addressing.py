"""Address matching: 003_9cdc7c48796dae4f.txt §12.1.2 (prefix, pattern) and §12.1.5 (pattern table)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference.router.addressing import (
    AddressTable,
    normalize_pattern,
    pattern_matches,
    prefix_matches,
    prefix_to_pattern,
    split_words,
    validate_pattern,
)

# The §12.1.5 example table: pattern, addresses it matches, addresses it does not.
PATTERN_TABLE = [
    ("news/*", ["news/europe", "news/usa"], ["news", "news/usa/sports"]),
    ("news/#", ["news", "news/europe", "news/usa/sports"], ["europe", "usa"]),
    ("news/europe/#",
     ["news/europe", "news/europe/sports", "news/europe/politics/fr"],
     ["news/usa", "europe"]),
    ("news/*/sports", ["news/europe/sports", "news/usa/sports"], ["news", "news/europe/fr/sports"]),
]


@pytest.mark.parametrize(
    ("pattern", "address", "expected"),
    [(p, a, True) for p, yes, _ in PATTERN_TABLE for a in yes]
    + [(p, a, False) for p, _, no in PATTERN_TABLE for a in no],
)
def test_pattern_table(pattern: str, address: str, expected: bool) -> None:
    assert pattern_matches(pattern, address) is expected


@pytest.mark.parametrize(
    ("pattern", "address", "expected"),
    [(p, a, True) for p, yes, _ in PATTERN_TABLE for a in yes]
    + [(p, a, False) for p, _, no in PATTERN_TABLE for a in no],
)
def test_pattern_table_with_dot_separators(pattern: str, address: str, expected: bool) -> None:
    # '.' and '/' are interchangeable in patterns and in addresses.
    assert pattern_matches(pattern.replace("/", "."), address) is expected
    assert pattern_matches(pattern, address.replace("/", ".")) is expected


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("my_address", True),
        ("my_address.1", True),
        ("my_address/1", True),
        ("my_address/1/2", True),
        ("my_address.1/2", True),
        ("my_address1", False),  # the near miss in §12.1.2
        ("my_addres", False),
        ("other/my_address", False),
        ("", False),
    ],
)
def test_prefix_rows(address: str, expected: bool) -> None:
    assert prefix_matches("my_address", address) is expected
    assert pattern_matches(prefix_to_pattern("my_address"), address) is expected


def test_prefix_to_pattern_appends_hash() -> None:
    assert prefix_to_pattern("a/b/c") == "a/b/c/#"
    assert prefix_to_pattern("a.b") == "a.b/#"
    assert prefix_to_pattern("a/") == "a/#"  # a trailing separator adds no empty word


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("a/b.c", ["a", "b", "c"]),
        ("a", ["a"]),
        ("", []),
        ("/", []),
        ("/a/b/", ["a", "b"]),  # leading and trailing separators are ignored
        ("a..b", ["a", "", "b"]),  # a doubled separator keeps an empty word
        ("a/*/#", ["a", "*", "#"]),
    ],
)
def test_split_words(address: str, words: list[str]) -> None:
    assert split_words(address) == words


def test_empty_words_are_significant() -> None:
    assert pattern_matches("a/*/b", "a..b")
    assert not pattern_matches("a/b", "a..b")
    assert pattern_matches("a/b", "/a/b/")


def test_hash_in_the_middle() -> None:
    assert pattern_matches("a/#/b", "a/b")
    assert pattern_matches("a/#/b", "a/x/b")
    assert pattern_matches("a/#/b", "a/x/y/b")
    assert not pattern_matches("a/#/b", "a/x/y")
    assert not pattern_matches("a/#/b", "b")


def test_a_pattern_of_many_words_matches_as_a_short_one_does() -> None:
    # hundreds of words: positions past 256 are ints Python does not share, so they must be compared by value
    words = [f"w{i}" for i in range(300)]
    assert pattern_matches("/".join(words) + "/#", "/".join(words))
    assert pattern_matches("/".join(words) + "/#", "/".join(words) + "/more/words")
    assert not pattern_matches("/".join(words) + "/#", "/".join(words[:-1]))
    assert pattern_matches("#/" + "/".join(words), "x/" + "/".join(words))


def test_lone_wildcards() -> None:
    assert pattern_matches("#", "")
    assert pattern_matches("#", "anything/at/all")
    assert pattern_matches("*", "one")
    assert not pattern_matches("*", "")
    assert not pattern_matches("*", "two/words")


def test_wildcards_in_addresses_are_literal_words() -> None:
    assert pattern_matches("a/*", "a/#")
    assert pattern_matches("a/#", "a/*/x")
    assert not pattern_matches("a/b", "a/*")
    assert not pattern_matches("a/b/c", "a/#")
    table: AddressTable[str] = AddressTable()
    table.add("a/b", "literal")
    assert table.lookup("a/*") is None
    assert table.lookup("a/b") == "literal"


@pytest.mark.parametrize("bad", ["", "/", "a*", "a/#b", "x/*y/z", "..", "news/#x"])
def test_invalid_patterns(bad: str) -> None:
    with pytest.raises(ValueError, match="pattern"):
        validate_pattern(bad)
    with pytest.raises(ValueError, match="pattern"):
        AddressTable().add(bad, 1)


@pytest.mark.parametrize(
    ("pattern", "normal"),
    [
        ("a.b", "a/b"),
        ("#/#", "#"),
        ("#/*", "*/#"),
        ("a/#/*/#/*/b", "a/*/*/#/b"),
        ("*/*", "*/*"),
    ],
)
def test_normalize_pattern(pattern: str, normal: str) -> None:
    assert normalize_pattern(pattern) == normal


def test_normalisation_keeps_meaning() -> None:
    for address in ["", "a", "a/b", "a/b/c"]:
        assert pattern_matches("#/*", address) == pattern_matches("*/#", address)


# --- AddressTable: best match -----------------------------------------------------------


def _table(*patterns: str) -> AddressTable[str]:
    table: AddressTable[str] = AddressTable()
    for pattern in patterns:
        table.add(pattern, pattern)
    return table


@pytest.mark.parametrize(
    ("patterns", "address", "winner"),
    [
        # a literal word beats '*', which beats '#'
        (["news/*", "news/#", "news/usa"], "news/usa", "news/usa"),
        (["news/*", "news/#"], "news/usa", "news/*"),
        (["news/#", "news/*/sports"], "news/usa/sports", "news/*/sports"),
        (["news/europe/#", "news/*/sports"], "news/europe/sports", "news/europe/#"),
        # the first differing position decides, even if a later word is more specific
        (["a/#", "#/b"], "a/b", "a/#"),
        (["*/#", "#/a"], "a", "*/#"),
        # a '#' that matched zero words still counts as '#' where it stood
        (["a/#/b", "a/*/#"], "a/b", "a/*/#"),
        (["a/b", "a/b/#"], "a/b", "a/b"),
        # a '#' swallows as few words as it can
        (["#/a/b", "#/*/*/b"], "a/a/b", "#/*/*/b"),
        # prefixes compete as their '/#' patterns: the longer prefix is the more specific
        (["queue/#", prefix_to_pattern("queue/orders")], "queue.orders.eu", "queue/orders/#"),
        (["queue/#", prefix_to_pattern("queue/orders")], "queue.other", "queue/#"),
        (["#"], "", "#"),
        (["a/*"], "b/x", None),
    ],
)
def test_best_match(patterns: list[str], address: str, winner: str | None) -> None:
    assert _table(*patterns).lookup(address) == winner
    # insertion order must not matter
    assert _table(*reversed(patterns)).lookup(address) == winner


def test_match_returns_the_pattern_as_written() -> None:
    table = _table("a.b.#")
    assert table.match("a/b/c") == ("a.b.#", "a.b.#")
    assert table.match("x") is None


def test_duplicates_are_rejected_after_normalisation() -> None:
    table = _table("a/b/#")
    for same in ["a/b/#", "a.b.#", "a/b/#/#"]:
        with pytest.raises(ValueError, match="duplicate pattern"):
            table.add(same, "again")
    table2 = _table("#/*")
    with pytest.raises(ValueError, match="duplicate pattern"):
        table2.add("*/#", "again")


def test_cache_is_invalidated_on_add() -> None:
    table = _table("a/#")
    assert table.lookup("a/b") == "a/#"
    table.add("a/b", "a/b")
    assert table.lookup("a/b") == "a/b"
    assert table.lookup("x") is None
    table.add("#", "#")
    assert table.lookup("x") == "#"


def test_table_introspection() -> None:
    table = _table("b", "a/#")
    assert len(table) == 2
    assert "a.#" in table and "c" not in table and "a*" not in table
    assert table.patterns() == ["b", "a/#"]
    assert sorted(table.items()) == [("a/#", "a/#"), ("b", "b")]


def test_very_long_address_does_not_recurse() -> None:
    table = _table("#/end", "a/#/z")
    address = "/".join(["a"] * 5000)
    assert table.lookup(address) is None
    assert table.lookup(address + "/z") == "a/#/z"
    assert table.lookup(address + "/end") == "#/end"


# --- properties ---------------------------------------------------------------------------

_word = st.sampled_from(["a", "b", "c", "news", "usa", ""])
_literal = st.sampled_from(["a", "b", "c", "news", "usa"])
_sep = st.sampled_from([".", "/"])


@st.composite
def _joined(draw: st.DrawFn, words: st.SearchStrategy[str], min_size: int = 0) -> str:
    parts = draw(st.lists(words, min_size=min_size, max_size=5))
    out = ""
    for i, part in enumerate(parts):
        out += (draw(_sep) if i else "") + part
    return out


@given(prefix=_joined(_literal, min_size=1), address=_joined(_word))
def test_prefix_is_its_hash_pattern(prefix: str, address: str) -> None:
    assert prefix_to_pattern(prefix) == prefix + "/#"
    assert prefix_matches(prefix, address) == pattern_matches(prefix + "/#", address)


@given(pattern=_joined(_literal, min_size=1), address=_joined(_word))
def test_literal_pattern_matches_only_itself(pattern: str, address: str) -> None:
    assert pattern_matches(pattern, address) == (split_words(pattern) == split_words(address))


@given(
    patterns=st.lists(_joined(st.sampled_from(["a", "b", "*", "#"]), min_size=1), min_size=1, max_size=6),
    address=_joined(_word),
)
def test_lookup_winner_matches_and_none_means_no_match(patterns: list[str], address: str) -> None:
    table: AddressTable[str] = AddressTable()
    for pattern in patterns:
        if pattern not in table:
            table.add(pattern, pattern)
    winner = table.lookup(address)
    if winner is None:
        assert not any(pattern_matches(p, address) for p in table.patterns())
    else:
        assert pattern_matches(winner, address)


def _best_trace(tokens: list[str], words: list[str]) -> tuple[tuple[int, ...], ...] | None:
    """Independent statement of the precedence rule, used as an oracle.

    A match is described by one step per pattern word: literal (1,), '*' (2,), '#' that
    swallowed k words (3, k), and (0,) where the pattern ends. The best match is the
    lexicographically smallest description: at the first word where two candidates differ,
    literal < '*' < '#', a shorter '#' first, and ending exactly here beats anything else.
    """
    if not tokens:
        return ((0,),) if not words else None
    head, rest = tokens[0], tokens[1:]
    if head == "#":
        found = []
        for k in range(len(words) + 1):
            tail = _best_trace(rest, words[k:])
            if tail is not None:
                found.append(((3, k), *tail))
        return min(found) if found else None
    if not words or (head != "*" and head != words[0]):
        return None
    tail = _best_trace(rest, words[1:])
    return None if tail is None else ((2,) if head == "*" else (1,), *tail)


@given(
    patterns=st.lists(_joined(st.sampled_from(["a", "b", "*", "#"]), min_size=1), min_size=1, max_size=6),
    address=_joined(_word),
)
def test_lookup_agrees_with_precedence_oracle(patterns: list[str], address: str) -> None:
    table: AddressTable[str] = AddressTable()
    for pattern in patterns:
        if pattern not in table:
            table.add(pattern, pattern)
    words = split_words(address)
    ranked = [
        (trace, pattern)
        for pattern in table.patterns()
        if (trace := _best_trace(split_words(normalize_pattern(pattern)), words)) is not None
    ]
    expected = min(ranked)[1] if ranked else None
    assert table.lookup(address) == expected
