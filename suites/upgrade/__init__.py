"""Rolling upgrades: a node's binary replaced by another release on the same data while traffic runs."""
