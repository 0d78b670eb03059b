"""The result of a torture run: operations, outcomes, faults, checks and violations."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class TortureReport:
    engine: str
    store: str
    program: str
    started: datetime
    clients: str
    seconds: float = 0.0
    ops: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    live_checks: Counter[str] = field(default_factory=Counter)
    final_checks: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def total_ops(self) -> int:
        return sum(self.ops.values())

    def sections(self) -> list[tuple[str, Counter[str]]]:
        return [
            ("operations by kind", self.ops),
            ("outcomes", self.outcomes),
            ("faults injected by kind", self.faults),
            ("live checks (concurrent readers)", self.live_checks),
            ("final check", self.final_checks),
        ]

    def markdown(self) -> str:
        rate = self.total_ops / self.seconds if self.seconds else 0.0
        out = [
            f"### {self.engine}: {self.total_ops:,} operations, "
            f"{len(self.violations)} violation(s)",
            "",
            f"- date: {self.started.strftime('%Y-%m-%d %H:%M UTC')}",
            f"- store: `{self.store}`, program `{self.program}`",
            f"- clients: {self.clients}",
            f"- duration: {self.seconds:.1f} s ({rate:,.0f} operations/s)",
            "",
        ]
        for title, counts in self.sections():
            out += [f"| {title} | count |", "|---|---:|"]
            out += [f"| {k} | {v:,} |" for k, v in sorted(counts.items())]
            out.append("")
        out.append("Violations: " + ("none." if self.ok else ""))
        out += [f"- {v}" for v in self.violations[:50]]
        if len(self.violations) > 50:
            out.append(f"- ... and {len(self.violations) - 50} more")
        return "\n".join(out) + "\n"
