"""In-process implementations of the loop's protocols: a sampler in this process as a ``Generator``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from azr.rollout.sampler import Completion, Sampler


class SamplerGenerator:
    """A ``Generator`` over one sampler in this process; generation runs in a worker thread so that the
    event loop keeps serving executor calls meanwhile (torch releases the GIL in its kernels)."""

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler
        self._lock = asyncio.Lock()  # one generate call at a time on one model

    async def generate(self, prompts: Sequence[Sequence[int]], n: int) -> list[list[Completion]]:
        if not prompts:
            return []
        async with self._lock:
            return await asyncio.to_thread(self.sampler.generate, prompts, n)
