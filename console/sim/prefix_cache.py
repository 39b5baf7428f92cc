"""The stand-in's prefix cache: how many of a prompt's leading tokens an earlier request left in the KV cache, the
way SGLang's radix cache (page size 1) matches them (pure).

Each prefix is kept as a chain of keys, key(i) = hash((key(i-1), token i)), so a prompt's match is the longest run
of its leading keys already held, found in one pass. The cache holds at most `capacity` tokens and forgets the ones
used longest ago first (SGLang evicts least-recently-used leaves when the KV pool runs short); /flush_cache empties
it. As in SGLang, the prompt's last token is always computed, so at most len - 1 tokens are a hit.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence


class PrefixCache:
    def __init__(self, capacity: int) -> None:
        self.capacity = max(0, capacity)
        self._keys: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._keys)

    def admit(self, tokens: Sequence[Hashable]) -> int:
        """The prompt's cached tokens (its match), then the prompt inserted as the most recently used."""
        if not self.capacity or not tokens:
            return 0
        keys = self._chain(tokens)
        hit = 0
        for key in keys:
            if key not in self._keys:
                break
            hit += 1
        for key in keys:
            self._keys[key] = None
            self._keys.move_to_end(key)
        while len(self._keys) > self.capacity:
            self._keys.popitem(last=False)
        return min(hit, len(tokens) - 1)

    def clear(self) -> None:
        self._keys.clear()

    @staticmethod
    def _chain(tokens: Sequence[Hashable]) -> list[int]:
        keys = []
        key = 0
        for token in tokens:
            key = hash((key, token))
            keys.append(key)
        return keys
