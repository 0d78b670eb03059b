"""``python -m bench``: run every benchmark, write JSON results and docs/benchmarks.md.

    python -m bench [--quick] [--out bench/results/] [--docs PATH]
                    [--dynamodb URL | --skip-dynamodb | --render]

``--quick`` is the smoke test CI runs: tiny sizes; it checks that every
section runs and that the results are written, never anything about speed,
and writes its Markdown next to the JSON unless ``--docs`` says otherwise.
Without ``--dynamodb`` DynamoDB Local is started (scripts/dynamodb-local.sh)
for the run and stopped afterwards. The exit status is non-zero only when a
section fails to run or the results cannot be written.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from bench import (
    cost,
    dynamo_cost,
    dynamo_local,
    hot_account,
    http_api,
    report,
    sqlite_api,
    sqlite_writers,
    targets,
)
from bench.common import ROOT, Json, Sizes, machine


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: tiny sizes")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "bench" / "results",
        help="directory for latest.json (default bench/results/)",
    )
    parser.add_argument(
        "--docs",
        type=Path,
        default=None,
        help="Markdown page to write (default docs/benchmarks.md; with --quick, OUT/benchmarks.md)",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--dynamodb", metavar="URL", help="a running DynamoDB Local endpoint")
    group.add_argument("--skip-dynamodb", action="store_true", help="SQLite and HTTP only")
    group.add_argument(
        "--render", action="store_true", help="only rewrite the Markdown from OUT/latest.json"
    )
    return parser.parse_args(argv)


def _section(results: Json, name: str, fn: Callable[[], Json]) -> bool:
    t0 = time.monotonic()
    print(f"bench: {name} ...", file=sys.stderr, flush=True)
    try:
        results[name] = fn()
    except Exception:
        results[name] = {"error": traceback.format_exc(limit=5)}
        print(f"bench: {name} FAILED\n{results[name]['error']}", file=sys.stderr)
        return False
    print(f"bench: {name} done in {time.monotonic() - t0:.1f}s", file=sys.stderr, flush=True)
    return True


def _render(source: Path, docs: Path) -> int:
    saved: Json = json.loads(source.read_text())
    measured = {k: v for k, v in saved["results"].items() if "error" not in v}
    print(f"bench: wrote {report.write_markdown({**saved, 'results': measured}, docs)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if args.render:
        return _render(args.out / "latest.json", args.docs or ROOT / "docs" / "benchmarks.md")
    sizes = Sizes.of(args.quick)
    started = time.monotonic()
    meta: Json = {"machine": machine(), "quick": args.quick, "sizes": asdict(sizes)}
    results: Json = {}
    ok = _section(results, "cost", lambda: cost.run_sqlite(sizes))
    ok &= _section(results, "sqlite", lambda: sqlite_api.run(sizes))
    ok &= _section(results, "sqlite_writers", lambda: sqlite_writers.run(sizes))
    ok &= _section(results, "http", lambda: http_api.run(sizes))
    ok &= _section(results, "hot_sqlite", lambda: hot_account.run_sqlite(sizes))
    if not args.skip_dynamodb:
        try:
            with dynamo_local.endpoint(args.dynamodb) as url:
                meta["dynamodb"] = url
                ok &= _section(results, "cost_dynamodb", lambda: cost.run_dynamodb(url, sizes))
                ok &= _section(results, "dynamodb", lambda: dynamo_cost.run(url, sizes))
                ok &= _section(
                    results, "hot_dynamodb", lambda: hot_account.run_dynamodb(url, sizes)
                )
        except Exception:
            results["dynamodb"] = {"error": traceback.format_exc(limit=5)}
            print(f"bench: DynamoDB Local FAILED\n{results['dynamodb']['error']}", file=sys.stderr)
            ok = False
    meta["seconds"] = round(time.monotonic() - started, 1)
    measured = {k: v for k, v in results.items() if "error" not in v}
    doc: Json = {"meta": meta, "targets": targets.evaluate(measured), "results": results}
    json_path = report.write_json(doc, args.out)
    docs = args.docs or (
        args.out / "benchmarks.md" if args.quick else ROOT / "docs" / "benchmarks.md"
    )
    md_path = report.write_markdown({**doc, "results": measured}, docs)
    print(f"bench: wrote {json_path} and {md_path} in {meta['seconds']:.0f}s", file=sys.stderr)
    for t in doc["targets"]:
        status = "met" if t["met"] else f"MISSED ({t['gap']})"
        print(f"  {t['target']}: {t['measured']} (goal {t['goal']}): {status}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
