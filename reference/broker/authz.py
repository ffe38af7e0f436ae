"""Who may do what on which address: Artemis's role-based security, keyed on an authenticated user name.

Sources (the seeds only say that a secured target needs permissions for what a broker connection does,
002_f23507c2891d6d06.txt "Important" and "Mirroring"; the rest follows Artemis's documented security model):

* users and roles come from Artemis's properties-file login module: `artemis-users.properties` holds
  `user = password`, `artemis-roles.properties` holds `role = user1,user2` (`load_users`, `load_roles`);
* `<security-setting match="...">` gives each operation (`send`, `consume`, `createAddress`,
  `createDurableQueue`, `createNonDurableQueue`, `deleteAddress`, `manage`) to a list of roles;
* for an address, the one most specific matching setting decides (Artemis's HierarchicalRepository with its
  MatchComparator, the same order as address-settings), and its permissions are not merged with less
  specific ones: a setting for `orders.#` that grants only `send` leaves `consume` on `orders.x` refused even
  when `#` grants it. No matching setting, or a permission the setting leaves out: refused.

Everything here is pure (no proton), so it is unit-tested without sockets.
"""

from __future__ import annotations

import functools
import os

from .config import OPERATIONS, ConfigError, SecuritySetting, compare_matches, match_address


_CACHE_LIMIT = 10_000  # addresses whose setting is remembered


class Authorizer:
    """Answers `check(user, operation, address)`: None when allowed, else why not (one line)."""

    def __init__(self, settings: list[SecuritySetting], user_roles: dict[str, frozenset[str]]):
        by_match = {s.match: s for s in settings}  # a repeated match replaces the earlier one, as in Artemis
        self._settings = by_match
        self._user_roles = user_roles
        self._cache: dict[str, SecuritySetting | None] = {}

    def setting_for(self, address: str) -> SecuritySetting | None:
        """The most specific setting whose match covers `address` (None: no setting covers it)."""
        if address not in self._cache:
            if len(self._cache) >= _CACHE_LIMIT:  # clients choose the names: never let them grow it without end
                self._cache.clear()
            matching = sorted((m for m in self._settings if match_address(m, address)),
                              key=functools.cmp_to_key(compare_matches))
            self._cache[address] = self._settings[matching[0]] if matching else None
        return self._cache[address]

    def roles_of(self, user: str | None) -> frozenset[str]:
        return self._user_roles.get(user, frozenset()) if user is not None else frozenset()

    def check(self, user: str | None, operation: str, address: str) -> str | None:
        if operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}")
        if user is None:
            return f"no authenticated user may {operation} on {address!r}"
        setting = self.setting_for(address)
        if setting is None:
            return f"user {user!r} may not {operation} on {address!r}: no security-setting matches it"
        allowed = setting.roles.get(operation, frozenset())
        mine = self.roles_of(user)
        if allowed & mine:
            return None
        return (f"user {user!r} (roles: {', '.join(sorted(mine)) or 'none'}) may not {operation} on {address!r}: "
                f"security-setting {setting.match!r} gives {operation} to "
                f"{', '.join(sorted(allowed)) or 'no role'}")


# ---- the properties-file login module ----------------------------------------------------------------------


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
