"""bench/canon.py on a short run: every figure, the zeros it promises, and the controls that
show those zeros could have been more (traps offered, contradictions planted)."""

from __future__ import annotations

import json

import pytest

from bench import canon

# The bench keeps its store in a file of its own: the PostgreSQL run keeps it (tests/store_rule.py).
pytestmark = pytest.mark.usefixtures("database_target")


def test_a_short_run_reports_its_figures_and_keeps_the_rules(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert canon.main(["--sessions", "18", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["proposals_with_personal_data"] == 0
    assert result["proposals_citing_user_turns"] == 0
    assert result["traps_kept"] == 0 and result["traps_offered"] >= 18
    assert result["planted_contradictions_offered"] >= 6
    assert result["planted_contradictions_kept"] == result["planted_contradictions_offered"]
    assert result["contradictions_of_sheet_flagged_share"] == 1.0
    assert result["own_improvisations_kept_share"] == 1.0
    assert result["proposals_per_session"] > 2
    assert all(t["pass"] for t in result["targets"])


def test_the_bench_counts_what_it_is_shown() -> None:
    """The bench's own reading of personal data, independent of the proposer's checks."""
    assert canon.holds_personal_data("Koldo tuvo una perra llamada Txuri.")
    assert canon.holds_personal_data("Koldo camina por la ribera de Algorta cada día.")
    assert canon.holds_personal_data("lleva años trabajando en el puerto, dice Koldo.")
    assert not canon.holds_personal_data("Koldo tiene un bote llamado Gaviota.")
