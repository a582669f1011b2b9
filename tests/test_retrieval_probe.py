"""bench/hybrid_probe.py without its models: the project does not install them, and says so."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from bench.embed_probe import MODELS
from bench.hybrid_probe import main as probe_main


def test_every_model_names_what_it_needs_and_how_to_install_it() -> None:
    assert set(MODELS) == {"minilm", "e5-small", "use-m3", "static-64d"}
    for model in MODELS.values():
        assert "numpy" in model.needed and model.install


@pytest.mark.skipif(
    importlib.util.find_spec("numpy") is not None, reason="an embedding venv: the models may run"
)
def test_a_model_whose_packages_are_absent_stops_before_loading_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "absent.json"  # never read: the check comes first
    assert probe_main([str(missing), "--model", "static-64d,e5-small"]) == 2
    said = capsys.readouterr().err
    assert "numpy" in said and "tokenlearn-static-model==0.1.1" in said


def test_an_unknown_model_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        probe_main(["absent.json", "--model", "e5-small,word2vec"])
    assert "unknown model word2vec" in capsys.readouterr().err
