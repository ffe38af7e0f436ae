"""Who may do what on which address: Artemis's role-based security, keyed on an authenticated user name.

Sources (the seeds only say that a secured target needs permissions for what a broker connection does,
002_f23507c2891d6d06.txt "Important" and "Mirroring"; the rest follows Artemis's documented security model):

* users and roles come from Artemis's properties-file login module: `artemis-users.properties` holds
  `user = password`, `artemis-roles.properties` holds `role = user1,user2` (logins.py);
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

from .config import OPERATIONS, SecuritySetting, compare_matches, match_address


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
