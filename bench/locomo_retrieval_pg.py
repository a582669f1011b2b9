"""bench/locomo_retrieval.py on both backends: the same LoCoMo questions ranked by the same
Python BM25 over candidates from SQLite FTS5 and from PostgreSQL full-text search.

    python bench/locomo_retrieval_pg.py DATA_PATH [--json]

PostgreSQL runs on a throwaway server (tests/pg_server.py); the server binaries are needed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench.locomo_retrieval as locomo
from tests.pg_server import running_server_async

METRICS = ("recall_at_5", "recall_at_10", "recall_600_tokens", "fragment_recall")


def _figures(report: dict[str, Any]) -> dict[str, Any]:
    return {key: report.get(key) for key in METRICS if key in report} or report


async def compare(path: Path, fit_share: float) -> dict[str, Any]:
    sqlite_report = await locomo.run(path, fit_share)
    async with running_server_async() as base:
        postgres_report = await locomo.run(path, fit_share, database=f"{base}/postgres")
    return {"sqlite": sqlite_report, "postgres": postgres_report}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    locomo.add_split_arguments(parser)
    args = parser.parse_args(argv)
    reports = asyncio.run(compare(args.data, args.fit_share))
    if args.json:
        print(json.dumps(reports))
        return 0
    for name, report in reports.items():
        print(f"== {name}")
        print(locomo.table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
