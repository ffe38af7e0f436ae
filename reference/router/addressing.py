"""Address matching for the reference router (003_9cdc7c48796dae4f.txt §12.1.2, §12.1.5).

Words
    An address is a sequence of words separated by ``.`` or ``/``; the two separators are
    interchangeable, so ``a.b`` and ``a/b`` are the same address for matching purposes.
    Leading and trailing separators are ignored (as qdrouterd does), so ``/a/b/`` is ``a/b``;
    a doubled separator in the middle keeps an empty word (``a..b`` is the three words
    ``a``, ``""``, ``b`` and is a different address from ``a.b``). The empty address has no
    words at all.

Patterns
    A pattern is a non-empty sequence of words where a word is ``*`` (exactly one word),
    ``#`` (zero or more words) or a literal that contains neither character. Mixed words
    such as ``a*`` or ``#x`` are rejected with ValueError. Runs of wildcards are normalised
    the way qdrouterd does (``#/#`` is ``#``, ``#/*`` is ``*/#``), so two patterns that differ
    only in that way, or only in their separators, are the same pattern.

Wildcards inside addresses
    The document reserves ``*`` and ``#`` for patterns and tells users not to put them in
    addresses. When an address does contain one, it is treated as an ordinary literal word:
    the pattern ``a/*`` matches the address ``a/#``, but the literal pattern ``a/b`` never
    matches ``a/*``.

Prefixes
    A prefix ``P`` is the pattern ``P/#`` (the §12.1.2 note): it matches ``P`` itself and
    anything that continues ``P`` after a separator, never ``P1``. Trailing separators of a
    prefix are dropped before ``/#`` is appended, so the prefix ``a/`` behaves like ``a``.

Precedence (which of several matching patterns wins)
    The address is walked word by word from the left, as qdrouterd's parse tree does. At
    each word, patterns that continue with that literal word are tried first, then patterns
    that continue with ``*``, then patterns that continue with ``#``; a ``#`` first tries to
    swallow as few words as possible. A pattern that ends exactly where the address ends is
    preferred over one that still has a ``#`` left to match nothing. The first complete
    match in this order wins. Put differently: compare two candidates word by word from the
    left; at the first position where they differ a literal beats ``*`` and ``*`` beats ``#``,
    and a ``#`` that matched zero words still counts as ``#`` at the position where it stood.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

SEPARATORS = "./"
STAR = "*"
HASH = "#"

_SPLIT = re.compile(r"[./]")

# Lookups are memoised per address. The cache is wiped when it reaches this size so that a
# stream of one-off addresses (temporary reply-to queues, say) cannot grow it without bound.
_CACHE_LIMIT = 8192


def split_words(address: str) -> list[str]:
    """Split an address (or pattern) into its words; see the module docstring."""
    trimmed = address.strip(SEPARATORS)
    if not trimmed:
        return []
    return _SPLIT.split(trimmed)


def prefix_to_pattern(prefix: str) -> str:
    """The pattern equivalent to a prefix: ``a/b/c`` -> ``a/b/c/#``."""
    return prefix.rstrip(SEPARATORS) + "/" + HASH


def prefix_matches(prefix: str, address: str) -> bool:
    """True when the words of ``prefix`` begin the words of ``address``.

    Written independently of the pattern machinery so the two can check each other.
    """
    head = split_words(prefix)
    return split_words(address)[: len(head)] == head


def _pattern_tokens(pattern: str) -> list[str]:
    """Validate a pattern and return its normalised words."""
    words = split_words(pattern)
    if not words:
        raise ValueError(f"pattern {pattern!r} has no words")
    for word in words:
        if word not in (STAR, HASH) and (STAR in word or HASH in word):
            raise ValueError(
                f"pattern {pattern!r}: word {word!r} mixes a wildcard with other characters "
                f"('*' and '#' must stand alone between separators)"
            )
    # Within a run of wildcards only the count of '*' and whether any '#' is present matter;
    # writing the '*'s first and a single '#' last gives one canonical spelling.
    out: list[str] = []
    run: list[str] = []
    for word in [*words, None]:
        if word in (STAR, HASH):
            run.append(word)
            continue
        if run:
            out.extend(STAR for w in run if w == STAR)
            if HASH in run:
                out.append(HASH)
            run = []
        if word is not None:
            out.append(word)
    return out


def validate_pattern(pattern: str) -> None:
    """Raise ValueError (with a readable message) if ``pattern`` is not a valid pattern."""
    _pattern_tokens(pattern)


def normalize_pattern(pattern: str) -> str:
    """Canonical spelling of a pattern: '/' separators, wildcard runs normalised."""
    return "/".join(_pattern_tokens(pattern))


def _tokens_match(tokens: list[str], words: list[str]) -> bool:
    # A small NFA: 'states' holds every pattern position reachable after the words seen so far.
    end = len(tokens)

    def closure(states: set[int]) -> set[int]:
        out = set(states)
        for pos in states:
            while pos < end and tokens[pos] == HASH:  # '#' may match nothing: step over it
                pos += 1
                out.add(pos)
        return out

    states = closure({0})
    for word in words:
        advanced: set[int] = set()
        for pos in states:
            if pos == end:
                continue
            token = tokens[pos]
            if token == HASH:
                advanced.add(pos)  # '#' swallows this word and may swallow more
            elif token in (STAR, word):
                advanced.add(pos + 1)
        states = closure(advanced)
        if not states:
            return False
    return end in states


def pattern_matches(pattern: str, address: str) -> bool:
    """True if ``address`` matches ``pattern`` (ValueError if the pattern is invalid)."""
    return _tokens_match(_pattern_tokens(pattern), split_words(address))


class _Node:
    """One word position of the parse tree; patterns sharing leading words share nodes."""

    __slots__ = ("entry", "hash", "literals", "star")

    def __init__(self) -> None:
        self.literals: dict[str, _Node] = {}
        self.star: _Node | None = None
        self.hash: _Node | None = None
        self.entry: tuple[str, object] | None = None  # (pattern as added, value) ending here


class AddressTable(Generic[T]):
    """Patterns mapped to values; ``lookup`` returns the value of the best matching pattern."""

    def __init__(self) -> None:
        self._root = _Node()
        self._patterns: dict[str, str] = {}  # normalised -> as added
        self._cache: dict[str, tuple[str, T] | None] = {}

    def __len__(self) -> int:
        return len(self._patterns)

    def __contains__(self, pattern: object) -> bool:
        if not isinstance(pattern, str):
            return False
        try:
            return normalize_pattern(pattern) in self._patterns
        except ValueError:
            return False

    def patterns(self) -> list[str]:
        """The patterns in the order they were added, as they were written."""
        return list(self._patterns.values())

    def add(self, pattern: str, value: T) -> None:
        tokens = _pattern_tokens(pattern)
        key = "/".join(tokens)
        if key in self._patterns:
            raise ValueError(f"duplicate pattern {pattern!r} (same as {self._patterns[key]!r})")
        node = self._root
        for token in tokens:
            if token == STAR:
                node.star = node.star or _Node()
                node = node.star
            elif token == HASH:
                node.hash = node.hash or _Node()
                node = node.hash
            else:
                node = node.literals.setdefault(token, _Node())
        node.entry = (pattern, value)
        self._patterns[key] = pattern
        self._cache.clear()  # any cached answer may now have a better match

    def lookup(self, address: str) -> T | None:
        found = self.match(address)
        return None if found is None else found[1]

    def match(self, address: str) -> tuple[str, T] | None:
        """The best matching (pattern as added, value), or None."""
        try:
            return self._cache[address]
        except KeyError:
            pass
        found = self._search(split_words(address))
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[address] = found
        return found

    def _search(self, words: list[str]) -> tuple[str, T] | None:
        # Depth-first search in precedence order, iterative so that an address with very many
        # words cannot exhaust the interpreter stack. A frame is (node, index, is_hash):
        # for an ordinary node, 'index' words have been consumed including the node's own;
        # for a '#' node, the '#' has swallowed the words up to 'index' so far.
        n = len(words)
        stack: list[tuple[_Node, int, bool]] = [(self._root, 0, False)]
        while stack:
            node, i, is_hash = stack.pop()
            if is_hash:
                if i == n:
                    if node.entry is not None:
                        return node.entry  # type: ignore[return-value]
                    continue
                stack.append((node, i + 1, True))  # swallow one more word, tried last
                self._push_children(stack, node, words, i)
                continue
            if i == n and node.entry is not None:
                return node.entry  # type: ignore[return-value]
            self._push_children(stack, node, words, i)
        return None

    @staticmethod
    def _push_children(stack: list[tuple[_Node, int, bool]], node: _Node, words: list[str], i: int) -> None:
        # Pushed in reverse so that pops come out literal, then '*', then '#'.
        if node.hash is not None:
            stack.append((node.hash, i, True))
        if i < len(words):
            if node.star is not None:
                stack.append((node.star, i + 1, False))
            child = node.literals.get(words[i])
            if child is not None:
                stack.append((child, i + 1, False))

    def items(self) -> Iterator[tuple[str, T]]:
        """(pattern as added, value) pairs in no particular order."""
        pending = [self._root]
        while pending:
            node = pending.pop()
            if node.entry is not None:
                yield node.entry  # type: ignore[misc]
            pending.extend(node.literals.values())
            pending.extend(child for child in (node.star, node.hash) if child is not None)
