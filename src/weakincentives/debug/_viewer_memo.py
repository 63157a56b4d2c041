"""A small thread-safe LRU cache that makes each value once (the viewer's computed pages)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Memo"]

_CACHE_SIZE = 16
V = TypeVar("V")


class Memo:
    """A small thread-safe LRU cache (comparisons, summaries, bundles).

    A value is made once: a thread that asks for a key being made waits for it rather
    than making it again (the run page asks for a run's statistics and its charts at
    once, and the charts need the statistics: at 100,000 results, a second of work).
    """

    def __init__(self, size: int = _CACHE_SIZE) -> None:
        self._size = size
        self._data: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._making: dict[Any, threading.Lock] = {}

    def has(self, key: Any) -> bool:
        """Whether the value of `key` is made or being made."""
        with self._lock:
            return key in self._data or key in self._making

    def get(self, key: Any, make: Callable[[], V]) -> V:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                value: V = self._data[key]
                return value
            making = self._making.setdefault(key, threading.Lock())
        with making:  # one maker per key; the others wait here, then find the value
            with self._lock:
                if key in self._data:
                    self._data.move_to_end(key)
                    found: V = self._data[key]
                    return found
            try:
                value = make()
            except BaseException:
                with self._lock:
                    self._making.pop(key, None)
                raise
            with self._lock:
                self._data[key] = value
                self._making.pop(key, None)
                while len(self._data) > self._size:
                    self._data.popitem(last=False)
        return value
