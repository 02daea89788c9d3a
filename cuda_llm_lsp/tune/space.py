"""Which configurations a tuning run measures: pure and seeded, so a run can be repeated.

Kernel Tuner's strategies are the anchor: `brute_force` when the space is small, and for larger
spaces its `random_sample` followed by `greedy_mls` (multi-start local search with the
"adjacent" neighbourhood). Here:

- **exhaustive** when the restricted space has at most `max_points` configurations: every one, in
  the listed order (the default configuration first). A space of more than `ENUMERATED_AT_MOST`
  combinations before restrictions is sampled without being enumerated.
- **sample** otherwise: `sample_fraction` of `max_points` drawn uniformly (rejection sampling
  over the product space, restrictions applied, the default always included); then local
  refinement: from the best measured configuration not yet climbed from, a greedy hill climb
  whose neighbours change one tunable to the next or previous value in its list; a climb that
  finds nothing better restarts from the next-best start. The run stops at `max_points`
  measured, at the time budget, or when every start has been climbed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from cuda_llm_lsp.source.spec.tunables import Configuration, Tunables
from cuda_llm_lsp.tune.types import Strategy

#: Spaces larger than this (before restrictions) are sampled without being enumerated first, so
#: a restriction that allows few of millions of combinations does not stall the start of a run.
ENUMERATED_AT_MOST = 200_000
Key = tuple[int, ...]  # a configuration's values in the tunables' order


@dataclass(frozen=True)
class Space:
    """The configurations of `tunables` that the restrictions allow."""

    tunables: Tunables
    constants: Mapping[str, int]  # integer template arguments, usable in restrictions

    def key(self, config: Configuration) -> Key:
        return tuple(config[name] for name in self.tunables.names)

    def config(self, key: Key) -> dict[str, int]:
        return dict(zip(self.tunables.names, key, strict=True))

    def allows(self, key: Key) -> bool:
        return self.tunables.allows(self.config(key), self.constants)

    def first(self, limit: int) -> list[dict[str, int]]:
        """Up to `limit` allowed configurations in the listed order (lazily enumerated)."""
        out: list[dict[str, int]] = []
        for config in self.tunables.configurations(self.constants):
            out.append(config)
            if len(out) >= limit:
                break
        return out

    def strategy(self, max_points: int) -> tuple[Strategy, list[dict[str, int]]]:
        """`exhaustive` with every configuration (default first) when they fit in `max_points`,
        else `sample` with none listed (the caller draws them with `sample`)."""
        if self.tunables.space_size > ENUMERATED_AT_MOST:  # not walked to its end: sampled
            return "sample", []
        found = self.first(max_points + 1)
        if len(found) > max_points:
            return "sample", []
        default = dict(self.tunables.default)
        rest = [c for c in found if c != default]
        return "exhaustive", ([default] if self.allows(self.key(default)) else []) + rest

    def sample(self, count: int, rng: random.Random, exclude: set[Key]) -> list[dict[str, int]]:
        """Up to `count` allowed configurations drawn uniformly, none in `exclude`."""
        lists = list(self.tunables.values.values())
        out: list[dict[str, int]] = []
        seen = set(exclude)
        attempts = 0
        while len(out) < count and attempts < 50 * count + 100:
            attempts += 1
            key = tuple(rng.choice(values) for values in lists)
            if key in seen:
                continue
            seen.add(key)
            if self.allows(key):
                out.append(self.config(key))
        return out

    def neighbours(self, key: Key) -> Iterator[Key]:
        """Configurations one step away: one tunable moved to its adjacent listed value."""
        for axis, values in enumerate(self.tunables.values.values()):
            at = values.index(key[axis])
            for step in (-1, 1):
                if 0 <= at + step < len(values):
                    moved = (*key[:axis], values[at + step], *key[axis + 1 :])
                    if self.allows(moved):
                        yield moved
