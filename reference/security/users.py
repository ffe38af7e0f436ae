"""The users file the reference router reads for SASL PLAIN.

qdrouterd checks PLAIN passwords through Cyrus SASL: its router section names a Cyrus config directory
(`saslConfigDir`) and config name (`saslConfigName`), whose `<name>.conf` points at a sasldb file. The
reference cannot read sasldb (a Berkeley DB), so it reads a plain text file in the same directory instead:

    <saslConfigDir>/<saslConfigName>.users      (saslConfigName defaults to qdrouterd)

one user per line, `name:password`; blank lines and lines starting with `#` are ignored. The harness writes
both files beside each other (harness/vendors/qdrouterd/render.py), so one rendered config serves both routers.
"""

from __future__ import annotations

from pathlib import Path


class UsersFileError(ValueError):
    """`FILE:LINE: what was expected`."""


def users_file(config_dir: str, config_name: str | None) -> Path:
    return Path(config_dir) / f"{config_name or 'qdrouterd'}.users"


def load_users(path: str | Path) -> dict[str, str]:
    users: dict[str, str] = {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsersFileError(f"{path}: cannot read the users file: {exc.strerror or exc}") from None
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, colon, password = line.partition(":")
        if not colon or not name.strip():
            raise UsersFileError(f"{path}:{number}: expected `name:password`")
        users[name.strip()] = password
    return users


def write_users(path: str | Path, users: dict[str, str]) -> Path:
    path = Path(path)
    path.write_text("".join(f"{name}:{password}\n" for name, password in users.items()), encoding="utf-8")
    path.chmod(0o600)
    return path
