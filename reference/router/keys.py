"""Routing keys: which destinations a message goes to, beyond its plain address.

A plain address is phase 0. For a waypoint address (003_9cdc7c48796dae4f.txt §12.1.4.2) client consumers
listen on phase 1, which only messages coming back from the broker (in-autolinks) are routed to, while
producers send on phase 0, which the out-autolinks to the broker consume. Fallback destinations
(§12.1.4.3) have a key of their own, used only when the address has no reachable consumer.
"""

PHASE1 = "M1:"
FALLBACK = "F:"


_PREFIXES = (PHASE1, FALLBACK)


def plain_address(key: str) -> str:
    if not key.startswith(_PREFIXES):  # most keys are plain: one call for them (asked for every message)
        return key
    for prefix in _PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix):]
    return key
