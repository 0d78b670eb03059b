"""Results to JSON (``latest.json``) and to the Markdown page ``docs/benchmarks.md``."""

from __future__ import annotations

import json
from pathlib import Path

from bench.common import ROOT, Json

NOTES = ROOT / "bench" / "NOTES.md"


def write_json(results: Json, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "latest.json"
    path.write_text(json.dumps(results, indent=2, sort_keys=False) + "\n")
    return path


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def _rate_rows(section: Json, base_key: str, base_name: str) -> list[list[object]]:
    rows = []
    for name, key in (("tallybook", "product"), (base_name, base_key)):
        s = section[key]
        rows.append([name, s["count"], s["per_second"], s["p50_ms"], s["p99_ms"]])
    return rows


def _g(x: float) -> str:
    return f"{x:g}"


def _cost(cost: Json) -> list[str]:
    lines = [f"## Capacity per operation, priced by AWS's rules: {cost['engine']}", ""]
    lines += [
        "Mean per call. WCU include index writes (also shown alone); a transactional "
        "write costs 2 WCU per KB, a standard one 1, an index write 1 per KB of the "
        "projected item; reads 1 RCU per 4 KB (strongly consistent). Priced by "
        "`tallybook.store.meter` from the items read and written, not read from "
        "DynamoDB Local, which misreports transactions and index writes. "
        "(a) = the active-flag reference design on the same meter.",
        "",
    ]
    rows = []
    for op, c in cost["product"].items():
        rows.append(
            [
                op,
                _g(c["requests"]),
                _g(c["rcu"]),
                _g(c["wcu"]),
                _g(c["index_wcu"]),
                _g(c["estimated_writes"]),
            ]
        )
    for op, c in cost["baseline_a"].items():
        rows.append([f"(a) {op}", _g(c["requests"]), _g(c["rcu"]), _g(c["wcu"]), "0", "0"])
    lines += _table(
        ["operation", "requests", "RCU", "WCU", "of which index", "estimated items"], rows
    )
    items = [
        [op, f"`{i['key']}`", i["table"], ", ".join(f"{k} {v}" for k, v in i["indexes"].items())]
        for op, c in cost["product"].items()
        for i in c.get("items", [])
    ]
    if items:
        lines += ["What each item of one call's transaction costs (WCU):", ""]
        lines += _table(["operation", "item (pk sk)", "table", "indexes"], items)
    return lines


def _writers(w: Json) -> list[str]:
    lines = [
        f"## SQLite: writer processes on one file ({w['accounts']:,} accounts, random "
        f"transfers, {w['seconds_per_run']:g} s per run, median of {w.get('rounds', 1)} "
        "interleaved rounds)",
        "",
        "Postings per second over all processes. raw SQL = the same rows and indexes "
        f"({w['rows_per_transfer']['put']} inserts, {w['rows_per_transfer']['update']} "
        "updates per transfer, recorded from the product) written by hand in the "
        "engine's schema; bare = read-then-insert of one row. Each implementation at "
        "the setting named: `full` fsyncs every commit (the default), `normal` "
        "survives a process crash only.",
        "",
    ]
    rows = []
    for setting, impls in w["settings"].items():
        for kind, runs in impls.items():
            cells: list[object] = [f"synchronous={setting}", kind]
            cells += [runs[n]["per_second"] for n in ("1", "2", "4")]
            cells.append(sum(r["errors"] for r in runs.values()))
            rows.append(cells)
    return lines + _table(
        ["durability", "implementation", "1 writer", "2 writers", "4 writers", "errors"], rows
    )


def _ddb(ddb: Json) -> list[str]:
    lines = ["## DynamoDB Local: requests and capacity units per operation", ""]
    lines += [
        "Mean per call over the repeats; RCU / WCU priced by AWS's rules (GSI writes "
        "included). (a) active flag and (b) history inside one item run on bare boto3, "
        "priced from the items they read and write (a single UpdateItem as DynamoDB "
        "Local reports it, which is exact for single-item writes).",
        "",
    ]
    rows = []
    for op, row in ddb["operations"].items():
        cells: list[object] = [op.replace("_", " + ")]
        for key in ("product", "baseline_a", "baseline_b"):
            c = row[key]
            cells.append(f"{_g(c['requests'])} req, {_g(c['rcu'])} RCU, {_g(c['wcu'])} WCU")
        cells.append(", ".join(f"{k} {v}" for k, v in row["product"]["by_operation"].items()))
        rows.append(cells)
    lines += _table(
        ["operation", "tallybook", "(a) active flag", "(b) one item", "tallybook calls"], rows
    )
    lines += ["### Cost per earn as history grows", ""]
    hist = ddb["history"]
    rows = []
    lengths = sorted({*map(int, hist["product"]), *map(int, hist["baseline_b"])})
    for n in lengths:
        p = hist["product"].get(str(n))
        b = hist["baseline_b"].get(str(n))
        pc = f"{_g(p['requests'])} req, {_g(p['rcu'])} RCU, {_g(p['wcu'])} WCU" if p else "-"
        if b is None:
            bc = "-"
        elif "error" in b:
            bc = f"fails: {b['error']}"
        else:
            bc = (
                f"{b['requests']} req, {_g(b['rcu'])} RCU, {_g(b['wcu'])} WCU; "
                f"balance read {_g(b['balance_rcu'])} RCU"
            )
        rows.append([f"{n:,}", pc, bc])
    lines += _table(["entries", "tallybook earn", "(b) earn"], rows)
    cpu = ddb["cpu_per_storage_call"]
    lines += ["### Client CPU time per storage call", ""]
    lines += _table(
        ["client", "CPU µs / call", "calls"],
        [
            [
                "tallybook (earn + balance, DynamoDB engine)",
                cpu["product_us"],
                cpu["product_requests"],
            ],
            [
                "(a) on bare boto3 (earn + balance)",
                cpu["baseline_a_us"],
                cpu["baseline_a_requests"],
            ],
        ],
    )
    return lines


def _hot(name: str, hot: Json) -> list[str]:
    rows = []
    for key in ("one_writer", "writers_16"):
        h = hot[key]
        rows.append(
            [
                h["writers"],
                h["postings"],
                h["per_second"],
                h["p50_ms"],
                h["p99_ms"],
                h["retries"],
                h["errors"],
                h["balance_ok"],
            ]
        )
    lines = [f"### {name}: ratio {hot['ratio']:.1%}", ""]
    return lines + _table(
        ["writers", "postings", "per s", "p50 ms", "p99 ms", "retries", "errors", "balance ok"],
        rows,
    )


def markdown(results: Json) -> str:
    meta = results["meta"]
    m = meta["machine"]
    lines = [
        "# Benchmarks",
        "",
        "Generated by `python -m bench` (`scripts/bench.sh`); do not edit by hand: "
        "the notes come from `bench/NOTES.md`.",
        "",
        *_table(
            ["", ""],
            [
                ["date", m["date"]],
                ["mode", "quick (smoke test, figures meaningless)" if meta["quick"] else "full"],
                ["machine", f"`{m['uname']}`"],
                ["CPU", f"{m['cpu']}, {m['cores']} cores"],
                ["load average at start", m["load_average_at_start"]],
                ["Python", m["python"]],
                ["duration", f"{meta['seconds']:.0f} s"],
            ],
        ),
        "## Targets",
        "",
        *_table(
            ["target", "goal", "measured", "met", "gap"],
            [
                [t["target"], t["goal"], t["measured"], "yes" if t["met"] else "**no**", t["gap"]]
                for t in results["targets"]
            ],
        ),
    ]
    r = results["results"]
    for key in ("cost_dynamodb", "cost"):
        if key in r:
            lines += _cost(r[key])
    if "sqlite_writers" in r:
        lines += _writers(r["sqlite_writers"])
    if "sqlite" in r:
        s = r["sqlite"]
        lines += [
            f"## Postings through the Python API on SQLite: {s['ratio']:.1%} of (c) "
            f"(synchronous={s.get('synchronous', 'normal')})",
            "",
        ]
        lines += _table(
            ["", "postings", "per s", "p50 ms", "p99 ms"],
            _rate_rows(s, "baseline_c", "(c) bare sqlite3 read-then-insert"),
        )
        lines += [
            f"tallybook: {s['product']['storage_requests_per_posting']} storage calls per posting, "
            f"{s['product']['client_cpu_us_per_storage_call']} µs CPU per storage call.",
            "",
        ]
    if "http" in r:
        h = r["http"]
        lines += [f"## Postings over HTTP on SQLite: {h['ratio']:.1%} of (d)", ""]
        lines += [
            f"{h['product']['threads']} client threads, keep-alive, loopback; errors: "
            f"tallybook {h['product']['errors']}, bare {h['baseline_d']['errors']}; "
            f"client CPU s: tallybook {h['product']['client_cpu_seconds']}, "
            f"bare {h['baseline_d']['client_cpu_seconds']}; tallybook made "
            f"{h['product'].get('storage_requests_per_request', '?')} storage calls per request.",
            "",
        ]
        lines += _table(
            ["", "requests", "per s", "p50 ms", "p99 ms"],
            _rate_rows(h, "baseline_d", "(d) bare FastAPI endpoint"),
        )
    if "dynamodb" in r:
        lines += _ddb(r["dynamodb"])
    if "hot_sqlite" in r or "hot_dynamodb" in r:
        lines += ["## Hot account: 16 concurrent writers against one", ""]
        if "hot_sqlite" in r:
            lines += _hot("SQLite", r["hot_sqlite"])
        if "hot_dynamodb" in r:
            lines += _hot("DynamoDB Local", r["hot_dynamodb"])
    if NOTES.exists():
        lines += [NOTES.read_text().strip(), ""]
    return "\n".join(lines)


def write_markdown(results: Json, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown(results))
    return path
