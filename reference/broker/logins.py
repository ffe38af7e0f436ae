"""Artemis's properties-file login module, as the reference broker reads it: artemis-users.properties (`user =
password`) and artemis-roles.properties (`role = user1,user2`), beside broker.xml as in an Artemis instance's etc/.
config.load_config reads them for a node with `<security-enabled>true`; authz.py checks operations against the roles.
"""

from __future__ import annotations

import os

from .errors import ConfigError


def read_properties(path: str) -> list[tuple[str, str, int]]:
    """(key, value, line) of a Java properties file, in the subset the login module's files use: one
    `key=value` or `key: value` per line, `#` and `!` comments, blank lines. A line continued with a backslash
    and escapes are refused (one-line ConfigError), since the reference would read them differently."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise ConfigError(path, 0, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(path, 0, "expected UTF-8 text") from None
    entries = []
    for number, raw in enumerate(lines, 1):
        text = raw.strip()
        if not text or text[0] in "#!":
            continue
        if "\\" in text:
            raise ConfigError(path, number, "backslash escapes and continued lines are not supported by the "
                              "reference broker (expected key = value on one line)")
        cut = min((i for i in (text.find("="), text.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise ConfigError(path, number, f"expected key = value, got {text!r}")
        entries.append((text[:cut].strip(), text[cut + 1:].strip(), number))
    return entries


def load_users(path: str) -> dict[str, str]:
    """`artemis-users.properties`: user -> password. Artemis's hashed form `ENC(...)` is refused: the
    reference compares plain text."""
    users: dict[str, str] = {}
    for user, password, line in read_properties(path):
        if password.startswith("ENC(") and password.endswith(")"):
            raise ConfigError(path, line, f"user {user!r}: hashed passwords (ENC(...)) are not supported by the "
                              "reference broker (expected the password in plain text)")
        if user in users:
            raise ConfigError(path, line, f"user {user!r} is listed twice")
        users[user] = password
    return users


def load_roles(path: str, users: dict[str, str]) -> dict[str, frozenset[str]]:
    """`artemis-roles.properties`: role = user1,user2 -> user -> roles. A user not in the users file is
    refused (a typo would otherwise silently grant nothing)."""
    user_roles: dict[str, set[str]] = {}
    seen: set[str] = set()
    for role, members, line in read_properties(path):
        if role in seen:
            raise ConfigError(path, line, f"role {role!r} is listed twice")
        seen.add(role)
        for user in (m.strip() for m in members.split(",")):
            if not user:
                continue
            if user not in users:
                raise ConfigError(path, line, f"role {role!r}: user {user!r} is not in artemis-users.properties")
            user_roles.setdefault(user, set()).add(role)
    return {user: frozenset(roles) for user, roles in user_roles.items()}


USERS_FILE = "artemis-users.properties"
ROLES_FILE = "artemis-roles.properties"


def login_files(config_path: str) -> tuple[str, str]:
    """Where the login module's files are: beside broker.xml, as in an Artemis instance's etc/."""
    folder = os.path.dirname(os.path.abspath(config_path))
    return os.path.join(folder, USERS_FILE), os.path.join(folder, ROLES_FILE)
