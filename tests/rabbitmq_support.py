"""What the tests against the real Debian rabbitmq-server share: whether one is installed here, and the mark that
skips a case, with the reason, when it is not."""

from __future__ import annotations

import pytest

from harness.vendors.rabbitmq import native as rmq
from harness.peers.base import PeerUnavailable


def rabbitmq_unavailable() -> str | None:
    """Why no native RabbitMQ can run here, or None when one can."""
    try:
        rmq.find_rabbitmq()
    except PeerUnavailable as exc:
        return str(exc)
    return None


needs_rabbitmq = pytest.mark.skipif(rabbitmq_unavailable() is not None,
                                    reason=f"peer unavailable: {rabbitmq_unavailable()}")
