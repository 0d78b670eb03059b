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


def evaluate(results: Json) -> list[Json]:
    rows: list[Json] = []
    if "sqlite" in results:
        rows.append(_ratio_row("Python API on SQLite vs (c)", 0.40, results["sqlite"]["ratio"]))
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
        ok = earn["wcu"] <= 4
        rows.append(
            _row(
                "uncontended earn: WCU",
                "<= 4",
                f"{earn['wcu']:g}",
                ok,
                "" if ok else f"{earn['wcu'] / 4:.1f}x the goal ({earn['wcu'] - 4:g} WCU over)",
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
