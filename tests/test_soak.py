"""Soak: `mentor serve` driven with new questions, long turns and follow-ups; its memory must level off.

The 5-minute run is `python -m mentor.bench.soak --duration 300`; this is its one-minute variant.
"""

from __future__ import annotations

import pytest

from mentor.bench.soak import SoakSpec, run_soak


@pytest.mark.slow
def test_rss_levels_off_under_sustained_new_questions(tmp_path) -> None:
    """A minute of four learners asking new questions (30% of them ~3,900 characters long) and follow-ups.

    The server's RSS is sampled every 3 s. Over the second half-minute it grew 63-79 MB (fitted line) while
    the embedder's freed memory stayed with glibc and oneDNN, and 5-11 MB since (what the bounded caches and
    stores still add as they fill). 25 MB sits between the two with room on both sides.

    The caches hold 256 entries here, so they fill in the first half and what grows in the second is not them:
    at their default 2,048, the reader's, the query vectors' and the searches' caches of long pasted turns filled
    for about two minutes (the 5-minute run: +48, +26, +18, +11 MB in its first four half-minutes, then 2-6), and
    the second half-minute grew 26-30 MB on a slower host, the code of before and after alike.
    """
    results = run_soak(SoakSpec(duration_s=60, sample_every_s=3, cache_entries=256), work=tmp_path)
    assert set(results["statuses"]) == {"200"}, results["statuses"]
    assert results["requests"] >= 100 and results["long_turns"] >= 20 and results["follow_ups"] >= 30
    growth = results["fitted_growth_second_half_mb"]
    assert growth is not None and growth <= 25, f"RSS grew {growth} MB in the second half: {results['samples']}"
