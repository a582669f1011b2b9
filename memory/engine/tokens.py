"""Local token estimates, calibrated against what the provider reports.

No tokenizer download is possible at run time, so counts are estimated from characters; the
ratio is corrected by the usage figures of real calls, so budgets track the real model.
"""

from __future__ import annotations

import math

# Claude-family tokenizers average roughly 3.5 characters per token on English and Spanish prose.
CHARS_PER_TOKEN = 3.5


class TokenEstimator:
    def __init__(self, ratio: float = 1.0) -> None:
        self.ratio = ratio

    def count(self, text: str) -> int:
        if not text:
            return 0
        return max(1, math.ceil(len(text) / CHARS_PER_TOKEN * self.ratio))

    def calibrate(self, estimated: int, reported: int, weight: float = 0.1) -> None:
        """Move the ratio towards reported/estimated; one odd call cannot swing it far."""
        if estimated <= 0 or reported <= 0:
            return
        observed = self.ratio * reported / estimated
        clamped = min(max(observed, 0.5), 2.0)
        self.ratio = (1 - weight) * self.ratio + weight * clamped
