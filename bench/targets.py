"""The targets the figures are held to: met or missed, and by how much."""

from __future__ import annotations

from bench.common import Json


def _row(name: str, target: str, measured: str, met: bool, gap: str) -> Json:
    return {"target": name, "goal": target, "measured": measured, "met": met, "gap": gap}


def _ratio_row(name: str, goal: float, value: float) -> Json:
    gap = (
        ""
        if value >= goal
        else f"{(goal - value) * 100:.1f} points short ({value / goal:.0%} of goal)"
    )
    return _row(name, f">= {goal:.0%} of baseline", f"{value:.1%}", value >= goal, gap)


def _cost_rows(cost: Json) -> list[Json]:
    """WCU per operation against issue 16's targets and DESIGN.md's ratios to (a)."""
    from bench.cost import TARGET_WCU

    where = "DynamoDB Local" if "DynamoDB" in cost["engine"] else "SQLite, priced"
    rows = []
    for op, goal in TARGET_WCU.items():
        wcu = cost["product"][op]["wcu"]
        ok = wcu <= goal
        gap = "" if ok else f"{wcu - goal:g} WCU over"
        rows.append(_row(f"{op}: WCU ({where})", f"<= {goal}", f"{wcu:g}", ok, gap))
    ref = cost["baseline_a"]["earn"]["wcu"]
    for op, label, factor in (("credit", "single-account posting", 1.5), ("earn", "earn", 2.0)):
        wcu = cost["product"][op]["wcu"]
        ok = wcu <= factor * ref
        rows.append(
            _row(
                f"{label} vs (a) active flag ({where})",
                f"<= {factor:g}x (a) = {factor * ref:g} WCU",
                f"{wcu / ref:.2f}x ({wcu:g} WCU)",
                ok,
                "" if ok else f"{wcu - factor * ref:g} WCU over",
            )
        )
    return rows


def _writer_rows(writers: Json) -> list[Json]:
    """tallybook with 2 and 4 writer processes at least its 1-process rate, per setting."""
    rows = []
    for setting, impls in writers["settings"].items():
        runs = impls["tallybook"]
        one = runs["1"]["per_second"]
        for n in ("2", "4"):
            value = runs[n]["per_second"] / one if one else 0.0
            row = _ratio_row(
                f"SQLite {n} writer processes vs 1 (synchronous={setting})", 1.0, value
            )
            rows.append(row)
    return rows


def evaluate(results: Json) -> list[Json]:
    rows: list[Json] = []
    cost = results.get("cost_dynamodb") or results.get("cost")
    if cost:
        rows += _cost_rows(cost)
    if "sqlite_writers" in results:
        rows += _writer_rows(results["sqlite_writers"])
    if "sqlite" in results:
        rows.append(_ratio_row("Python API on SQLite vs (c)", 0.40, results["sqlite"]["ratio"]))
        from bench.sqlite_api import REFERENCE_PER_SECOND

        rows.append(
            _ratio_row(
                f"Python API on SQLite, 1 process, vs {REFERENCE_PER_SECOND:g}/s (2026-11-23)",
                2.0,
                results["sqlite"]["product"]["per_second"] / REFERENCE_PER_SECOND,
            )
        )
    if "http" in results:
        rows.append(_ratio_row("HTTP on SQLite vs (d)", 0.50, results["http"]["ratio"]))
    ddb = results.get("dynamodb")
    if ddb:
        earn = ddb["operations"]["earn"]["product"]
        ok = earn["requests"] <= 2
        rows.append(
            _row(
                "uncontended earn: requests",
                "<= 2",
                f"{earn['requests']:g}",
                ok,
                "" if ok else f"{earn['requests'] - 2:g} request(s) over",
            )
        )
        hist = ddb["history"]["product"]
        short, long_ = hist[min(hist, key=int)], hist[max(hist, key=int)]
        keys = ("requests", "rcu", "wcu")
        flat = all(short[k] == long_[k] for k in keys)
        lengths = f"{min(hist, key=int)} -> {max(hist, key=int)} entries"
        measured = ", ".join(f"{k} {short[k]:g} -> {long_[k]:g}" for k in keys)
        rows.append(
            _row(
                f"earn flat ({lengths})",
                "equal cost",
                measured,
                flat,
                "" if flat else "cost grows with history",
            )
        )
    for engine in ("hot_sqlite", "hot_dynamodb"):
        if engine in results:
            rows.append(
                _ratio_row(
                    f"hot account, 16 writers vs 1 ({engine.split('_')[1]})",
                    0.70,
                    results[engine]["ratio"],
                )
            )
    return rows
