"""The reference broker's configuration error: one line naming the file, the line and what was expected."""

from __future__ import annotations


class ConfigError(Exception):
    def __init__(self, path: str, line: int, message: str):
        message = message.replace("\r", "\\r").replace("\n", "\\n")  # one line, whatever a value held
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line, self.message = path, line, message
