"""Write a shrunk fuzz program as a runnable pytest file: `<out_dir>/fuzz/<signature>.py`.

The file holds the steps as plain data and calls `harness.fuzz.stateful.replay`, which starts the same
topology with the same peers (and the same deliberately broken settings, if any), runs the steps and returns
the signatures of the properties that failed. Its test passes when the property holds, so it fails against
the peer it was found on and passes once that peer is fixed. The peers and breaks can be overridden from the
environment to try it elsewhere:

    INTEROP_FUZZ_PEERS=router=qdrouterd   INTEROP_FUZZ_BREAKS=none   pytest <file>
"""

from __future__ import annotations

import pprint
import re
from pathlib import Path

_UNSAFE = re.compile(r"[^a-z0-9._-]+")
_NOT_IDENTIFIER = re.compile(r"[^a-z0-9]+")


def file_name(signature: str) -> str:
    return _UNSAFE.sub("-", signature.lower()).strip("-") + ".py"


def render(signature: str, message: str, steps: list, topology: str, peers: dict, breaks: dict,
           reference_peers: dict | None = None) -> str:
    """The reproducer's source text. `steps` are (op, args) pairs; `breaks` node -> [fault names];
    `reference_peers` set for a differential finding (the steps then run against both and are compared)."""
    steps_text = pprint.pformat([tuple(s) for s in steps], width=110, sort_dicts=False)
    return f'''"""Reproducer written by `interop fuzz` (stateful): {signature}

{_wrap(message)}

Replays {len(steps)} step(s) on topology {topology} and asserts the property holds; it fails while the
finding stands. Override the peers or breaks: INTEROP_FUZZ_PEERS=router=qdrouterd INTEROP_FUZZ_BREAKS=none.
"""

from harness.fuzz.stateful import replay, replay_options

SIGNATURE = {signature!r}
TOPOLOGY = {topology!r}
PEERS = {peers!r}
BREAKS = {breaks!r}
REFERENCE_PEERS = {reference_peers!r}
STEPS = {steps_text}


def test_{_NOT_IDENTIFIER.sub("_", signature.lower()).strip("_")}():
    peers, breaks = replay_options(PEERS, BREAKS)
    found = replay(TOPOLOGY, peers, STEPS, breaks=breaks, reference_peers=REFERENCE_PEERS)
    assert SIGNATURE not in found, f"{{SIGNATURE}}: {{found[SIGNATURE]}}"
'''


def write(out_dir: Path, signature: str, message: str, steps: list, topology: str, peers: dict,
          breaks: dict, reference_peers: dict | None = None) -> Path:
    directory = Path(out_dir) / "fuzz"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / file_name(signature)
    path.write_text(render(signature, message, steps, topology, peers, breaks, reference_peers))
    return path


def _wrap(text: str, width: int = 110) -> str:
    words, lines, line = text.replace('"""', "'''").split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "\n".join(lines + [line])
