"""Findings of fuzz sessions that are recorded differences of a product (issue 57): found, written up, kept.

A nightly fuzzes every product with the same seeds, so it meets the same findings night after night. Each one that
has been minimised and written up is listed in the product's harness/vendors/<vendor>/expected.yaml, under
`fuzz:`:

    fuzz:
      - finding: frames/hang:trickle.drop@sasl-init        # <mode>/<signature>, as the session prints it (or a
                                                           # list of them: the kinds one input gives)
        checked_by: suites/robustness/test_crashers.py::test_server_survives_the_input[broker-trickle.drop@sasl-init]
        versions: ">=2.39"                                  # optional, PEP 440, as for `cases:`
        reason: >-
          What the product does, with the evidence.

A signature may be a pattern (`*`, fnmatch) that names every input of one fault. `checked_by` names the case of
the same file's `cases:` that replays the input (or, for a pattern, one input of the fault) on every run (the robustness
suite's crashers.yaml entry): a frames finding is recorded only together with its regression case. A stateful
finding has no such case; its entry says so by leaving `checked_by` out.

The session still reports a recorded finding, with outcome `xfail` and the recorded reason, and the report shows
it; only a finding that is not recorded makes `interop fuzz` (and so the nightly) exit 1.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path

import yaml

from ..peers.registry import expected_path


class RecordedFindingsError(ValueError):
    """A malformed `fuzz:` entry: the message names the file, the entry and what was expected."""


class Recorded(dict):
    """signature (or pattern) -> reason. A pattern with `*` (fnmatch) names every input of one fault, such as each
    variant of a frame only a server may send: `close-wait:sasl-mechanisms.*`. `in` and `get` match patterns too."""

    def reason(self, signature: str) -> str | None:
        if signature in self.keys():
            return dict.__getitem__(self, signature)
        return next((r for pattern, r in self.items() if "*" in pattern and fnmatchcase(signature, pattern)), None)

    def __contains__(self, signature) -> bool:
        return self.reason(signature) is not None

    def get(self, signature, default=None):
        found = self.reason(signature)
        return default if found is None else found


def recorded_findings(vendor: str, version: str | None, mode: str, expected_dir: Path | None = None) -> Recorded:
    """signature -> reason, for the findings of `mode` (frames, stateful) recorded for `vendor` at `version` (an
    entry with `versions:` applies only to the releases it names; a version that cannot be told matches none)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    path = expected_dir / f"{vendor}.yaml" if expected_dir else expected_path(vendor)
    if path is None or not path.exists():
        return Recorded()
    data = yaml.safe_load(path.read_text()) or {}
    entries = data.get("fuzz") or []
    if not isinstance(entries, list):
        raise RecordedFindingsError(f"{path}: fuzz: expected a list of entries with 'finding' and 'reason'")
    cases = {entry.get("case") for entry in data.get("cases") or [] if isinstance(entry, dict)}
    found = Recorded()
    for i, entry in enumerate(entries):
        where = f"{path}: fuzz[{i}]"
        if not isinstance(entry, dict) or not entry.get("finding") or not entry.get("reason"):
            raise RecordedFindingsError(f"{where}: expected a mapping with 'finding' (<mode>/<signature>) and 'reason'")
        named = entry["finding"] if isinstance(entry["finding"], list) else [entry["finding"]]
        signatures = []
        for finding in named:
            entry_mode, _, signature = str(finding).partition("/")
            if entry_mode not in ("frames", "stateful") or not signature:
                raise RecordedFindingsError(f"{where}.finding: expected frames/<signature> or stateful/<signature> "
                                            f"(or a list of them), got {finding!r}")
            signatures.append((entry_mode, signature))
        checked_by = entry.get("checked_by")
        if checked_by is not None and checked_by not in cases:
            raise RecordedFindingsError(f"{where}.checked_by: {checked_by!r} is not a case of this file's cases: "
                                        "a finding is recorded with the case that replays it")
        signatures = [signature for entry_mode, signature in signatures if entry_mode == mode]
        if not signatures:
            continue
        if entry.get("versions") is not None:
            try:
                within = SpecifierSet(str(entry["versions"]))
            except InvalidSpecifier:
                raise RecordedFindingsError(f"{where}.versions: expected PEP 440 version specifiers such as "
                                            f"'<2.40.0', got {entry['versions']!r}") from None
            try:
                if version is None or not within.contains(Version(version), prereleases=True):
                    continue
            except InvalidVersion:
                continue  # a release the product names in its own way: not known to be in the range
        for signature in signatures:
            found[signature] = " ".join(str(entry["reason"]).split())
    return found
