"""Address prefix and pattern matching, observed over the wire (003 §12.1.2, §12.1.5).

Every configured entry used here is multicast, and an address no entry matches is balanced (the default),
so two receivers on an address tell the two apart: a matched address gives each receiver a copy, an
unmatched one gives one copy in total.
"""

import pytest

pytestmark = pytest.mark.requires("distribution.multicast", "distribution.balanced")


def copies_delivered(clients, url: str, address: str) -> int:
    """Attach two receivers to `address`, send one message, return how many copies arrived."""
    receivers = [clients.connect(url).receiver(address) for _ in range(2)]
    conn = clients.connect(url)
    sender = conn.sender(address)
    sender.send(1)
    assert sender.wait_outcomes(1)[0].outcome == "accepted"
    for r in receivers:
        r.conn.sync()
    return sum(r.count for r in receivers)


def _rows(spec_id, client, matches, misses):
    return ([pytest.param(client, a, True, id=f"{client}:{a}", marks=pytest.mark.spec(spec_id)) for a in matches]
            + [pytest.param(client, a, False, id=f"{client}:not:{a}", marks=pytest.mark.spec(spec_id))
               for a in misses])


# The documented example table of §12.1.5: pattern, addresses it matches, addresses it does not.
TABLE = (
    _rows("ROUTING-MATCH-PATTERN-3", "news-star", ["news/europe", "news/usa"], ["news", "news/usa/sports"])
    + _rows("ROUTING-MATCH-PATTERN-3", "news-hash", ["news", "news/europe", "news/usa/sports"], ["europe", "usa"])
    + _rows("ROUTING-MATCH-PATTERN-3", "news-europe-hash",
            ["news/europe", "news/europe/sports", "news/europe/politics/fr"], ["news/usa", "europe"])
    + _rows("ROUTING-MATCH-PATTERN-3", "news-star-sports",
            ["news/europe/sports", "news/usa/sports"], ["news", "news/europe/fr/sports"])
)


@pytest.mark.parametrize("client,address,matched", TABLE)
def test_documented_pattern_examples(topology, clients, details, client, address, matched):
    running = topology("match-table")
    copies = copies_delivered(clients, running.client_url(client), address)
    details.update(copies=copies)
    assert copies == (2 if matched else 1), (
        f"{address!r} {'should' if matched else 'should not'} match the pattern on node {client}")


# Prefix `my_address` (single-router topology): exact address and `.`/`/` continuations only.
PREFIX_ROWS = [
    pytest.param("my_address", True, marks=pytest.mark.spec("ROUTING-MATCH-PREFIX-1")),
    pytest.param("my_address.1", True, marks=pytest.mark.spec("ROUTING-MATCH-PREFIX-1")),
    pytest.param("my_address/1", True, marks=pytest.mark.spec("ROUTING-MATCH-PREFIX-1")),
    pytest.param("my_address/a.b/c", True, marks=pytest.mark.spec("ROUTING-MATCH-PREFIX-1", "ROUTING-MATCH-PREFIX-3")),
    pytest.param("my_address1", False, marks=pytest.mark.spec("ROUTING-MATCH-PREFIX-2")),
    pytest.param("my_addres", False, marks=pytest.mark.spec("ROUTING-MATCH-PREFIX-2")),
    pytest.param("x.my_address", False, marks=pytest.mark.spec("ROUTING-MATCH-PREFIX-2")),
]


@pytest.mark.parametrize("address,matched", PREFIX_ROWS)
def test_prefix_matches_whole_leading_words(single_router, clients, details, address, matched):
    copies = copies_delivered(clients, single_router.client_url("producer"), address)
    details.update(copies=copies)
    assert copies == (2 if matched else 1)


WILDCARD_ROWS = [
    # `*` is exactly one word
    pytest.param("match/x/one", True, marks=pytest.mark.spec("ROUTING-MATCH-PATTERN-1")),
    pytest.param("match.x.one", True, marks=pytest.mark.spec("ROUTING-MATCH-PATTERN-1")),
    pytest.param("match/one", False, marks=pytest.mark.spec("ROUTING-MATCH-PATTERN-1")),
    pytest.param("match/x/y/one", False, marks=pytest.mark.spec("ROUTING-MATCH-PATTERN-1")),
    # `#` is zero or more words
    pytest.param("match/any", True, marks=pytest.mark.spec("ROUTING-MATCH-PATTERN-2")),
    pytest.param("match/x/any", True, marks=pytest.mark.spec("ROUTING-MATCH-PATTERN-2")),
    pytest.param("match/x/y/z/any", True, marks=pytest.mark.spec("ROUTING-MATCH-PATTERN-2")),
    pytest.param("match/x/any/more", False, marks=pytest.mark.spec("ROUTING-MATCH-PATTERN-2")),
    pytest.param("wild", True, marks=pytest.mark.spec("ROUTING-MATCH-PATTERN-2")),
    pytest.param("wild.a.b", True, marks=pytest.mark.spec("ROUTING-MATCH-PATTERN-2")),
    pytest.param("wilder", False, marks=pytest.mark.spec("ROUTING-MATCH-PATTERN-2")),
    # the more specific entry wins: `wild.solo` (closest) beats `wild.#` (multicast)
    pytest.param("wild.solo", False, marks=pytest.mark.spec("ROUTING-CONFIG-1")),
    pytest.param("wild.solo.x", False, marks=pytest.mark.spec("ROUTING-CONFIG-1")),
    pytest.param("wild.solos", True, marks=pytest.mark.spec("ROUTING-CONFIG-1")),
]


@pytest.mark.parametrize("address,fans_out", WILDCARD_ROWS)
def test_wildcards_and_most_specific_entry(single_router, clients, details, address, fans_out):
    copies = copies_delivered(clients, single_router.client_url("producer"), address)
    details.update(copies=copies)
    assert copies == (2 if fans_out else 1)
