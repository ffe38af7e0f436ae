"""Planted faults of the config differential (`interop fuzz --configs --break ...`): a fault rewrites the config
file that the matching peers read, nothing else, so that the session can be seen to catch a reader that
accepts what the product refuses (or the other way round).

Same syntax as harness/breaks.py, `[ROLE[=VENDOR]:]FAULT`, and the same `Break`: `--break
router=reference:one-line-sections` hands the reference router the unfolded file while qdrouterd reads the file
as generated. The topology faults of harness/breaks.py change a topology; these change a file, so each mode takes
its own kind and says so for the other.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..breaks import Break, parse_break


@dataclass(frozen=True)
class FileFault:
    name: str
    role: str
    description: str
    rewrite: Callable[[str], str]


_ONE_LINE = re.compile(r"^(\s*)([\w-]+)\s*\{(.*)\}\s*$")


def unfold_one_line_sections(text: str) -> str:
    """`router { mode: interior id: R1 }` -> one `key: value` per line: how the reference router read such a
    line before issue 53 (a value ran up to the next `key:`), and what qdrouterd 1.19 refuses."""
    out = []
    for line in text.splitlines():
        match = _ONE_LINE.match(line)
        if not match:
            out.append(line)
            continue
        indent, name, body = match.groups()
        attrs: list[list[str]] = []
        for token in body.split():
            if token.endswith(":") and len(token) > 1:
                attrs.append([token])
            elif attrs:
                attrs[-1].append(token)
        out.append(f"{indent}{name} {{")
        out.extend(f"{indent}    {' '.join(words)}" for words in attrs)
        out.append(f"{indent}}}")
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


FILE_FAULTS: dict[str, FileFault] = {f.name: f for f in (
    FileFault("one-line-sections", "router", "sections written on one line are unfolded to one attribute per line "
              "before the peer reads the file (the reference router's reading before issue 53)",
              unfold_one_line_sections),
)}


def parse_file_break(text: str) -> Break:
    """`[ROLE[=VENDOR]:]FAULT` naming one of FILE_FAULTS; BreakError (one line) otherwise."""
    return parse_break(text, faults=FILE_FAULTS, of=" for --configs")


def rewrite_for(text: str, role: str, vendor: str, breaks: list[Break]) -> str:
    """The file `vendor` in `role` reads: `text` after every matching fault."""
    for b in breaks:
        if b.applies_to(role, vendor):
            text = FILE_FAULTS[b.fault].rewrite(text)
    return text
