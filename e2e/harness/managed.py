"""A process or service a test starts with `with X(...) as x:`: start(), and stop() also when start()
fails half-way, so nothing it spawned outlives a failed start."""

from __future__ import annotations

from typing import Any, Self


class Managed:
    def start(self) -> Any:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
