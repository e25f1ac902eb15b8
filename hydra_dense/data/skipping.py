"""Skipping unreadable samples (``skip_bad``), counted across data-loader workers."""
from __future__ import annotations

import logging
import multiprocessing

__all__ = ["SkipPolicy"]


class SkipPolicy:
    """``skip_bad`` for datasets: :meth:`load_or_skip` calls ``self.load(i)`` and, when it raises
    one of ``errors``, re-raises — or with ``skip_bad`` logs it, counts it (shared with data-loader
    workers) and returns None, which the collate functions drop."""

    def init_skipping(self, skip_bad: bool) -> None:
        self.skip_bad = skip_bad
        self._skipped = multiprocessing.Value("i", 0)

    @property
    def skipped(self) -> int:
        return self._skipped.value

    def load_or_skip(self, i: int, errors: tuple[type[BaseException], ...]):
        try:
            return self.load(i)  # type: ignore[attr-defined]
        except errors as err:
            if not self.skip_bad:
                raise
            self.count_skip(i, err)
            return None

    def count_skip(self, i: int, err: BaseException) -> None:
        """Sample ``i`` is skipped because of ``err``: logged and counted."""
        with self._skipped.get_lock():
            self._skipped.value += 1
        logging.getLogger(type(self).__module__).warning("skipping sample %d: %s", i, err)
