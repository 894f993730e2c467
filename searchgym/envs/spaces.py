"""A ``gymnasium.spaces.Text`` that holds any Unicode text.

Gymnasium's ``Text.contains`` checks every character against a finite charset. Agent actions and retrieved
passages can hold any character (NUL included), and a charset of all 1.1M code points would cost tens of MB
per space, so :class:`UnicodeText` accepts any ``str`` within its length bounds. ``sample()`` draws from a
printable ASCII charset (which includes ``<``, ``>`` and ``/``, so random samples can contain tags) and, unless
a length is given, keeps samples to at most ``sample_max_length`` characters so that ``check_env`` stays fast
when ``max_length`` is in the millions.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium import spaces

SAMPLE_CHARSET = string.printable


class UnicodeText(spaces.Text):
    def __init__(self, max_length: int, *, min_length: int = 0, charset: str = SAMPLE_CHARSET,
                 sample_max_length: int = 256, seed: int | np.random.Generator | None = None):
        super().__init__(max_length, min_length=min_length, charset=charset, seed=seed)
        self.sample_max_length = int(min(max(sample_max_length, min_length), max_length))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is None and probability is None:
            length = int(self.np_random.integers(self.min_length, self.sample_max_length + 1))
            return super().sample(mask=(length, None))
        return super().sample(mask=mask, probability=probability)

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnicodeText) and super().__eq__(other)
