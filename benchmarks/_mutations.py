"""Random JSON values and one-node mutations: what the fuzzers build inputs from.

A :class:`Mutations` draws keys and strings from its own vocabularies (the
words of the formats it fuzzes), so random values look like what a reader
looks for; :func:`splice` puts a few random bytes somewhere in an encoding.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutations:
    """Random values and mutations over a vocabulary.

    Attributes:
        words: Object keys (and some strings).
        values: Strings the formats give meaning to.
    """

    words: Sequence[str]
    values: Sequence[str]

    def scalar(self, rng: random.Random) -> object:
        """A random JSON scalar: null, a boolean, an edge number or a string."""
        pick = rng.randrange(9)
        if pick == 0:
            return None
        if pick == 1:
            return rng.random() < 0.5
        if pick == 2:
            return rng.choice([0, -1, 2**63, -(2**64), 10**30, 1.5, -0.0])
        if pick == 3:
            return "".join(
                chr(rng.randrange(0x20, 0x3000)) for _ in range(rng.randrange(6))
            )
        if pick == 4:
            return rng.choice(self.words)
        return rng.choice(self.values)

    def value(self, rng: random.Random, depth: int = 0) -> object:
        """A random JSON value, at most four levels deep."""
        if depth >= 4 or rng.random() < 0.35:
            return self.scalar(rng)
        if rng.random() < 0.4:
            return [self.value(rng, depth + 1) for _ in range(rng.randrange(4))]
        return {
            rng.choice(self.words): self.value(rng, depth + 1)
            for _ in range(rng.randrange(5))
        }

    def mutate(self, rng: random.Random, value: object, depth: int = 0) -> object:
        """Replace one node (reached by a random path) with a random value."""
        if depth > 6 or rng.random() < 0.15:
            return self.value(rng)
        if isinstance(value, dict) and value:
            key = rng.choice(list(value))
            if rng.random() < 0.1:
                return {k: v for k, v in value.items() if k != key}  # drop a key
            return value | {key: self.mutate(rng, value[key], depth + 1)}
        if isinstance(value, list) and value:
            i = rng.randrange(len(value))
            if rng.random() < 0.1:
                return value[:i] + value[i + 1 :] + value[:1]  # drop one, repeat one
            return [*value[:i], self.mutate(rng, value[i], depth + 1), *value[i + 1 :]]
        return self.value(rng)


def splice(rng: random.Random, data: bytes) -> bytes:
    """``data`` with up to 8 random bytes put in at a random place, over up to 8."""
    at = rng.randrange(len(data) + 1)
    noise = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
    cut = rng.randrange(9)
    return data[:at] + noise + data[at + cut :]


def dump(value: object) -> bytes:
    """A value as JSON (what is no JSON type written as its ``str``)."""
    return json.dumps(value, default=str).encode()
