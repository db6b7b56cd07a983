"""The conformance kit's report: the support manifest (per claimed op, its element types with records
passed/run) and the pass table (per section: pass, fail, known, skip and why), as text or JSON."""

from __future__ import annotations

import re
import textwrap
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .conformance import Result

#: The kit's sections, in the order they run and print.
SECTIONS = ("records", "nodes", "models")


@dataclass
class Report:
    """The results of one backend's checks, and the native op names it reports."""

    backend: str
    results: list[Result]
    native_ops: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(r.status == "fail" for r in self.results)

    def manifest(self) -> list[dict]:
        """Per claimed op: each element type with records passed/run; claimed ops without records too."""
        per = defaultdict(lambda: defaultdict(lambda: [0, 0]))
        for r in self.results:
            if r.check.section == "records" and r.status != "skip":
                cell = per[r.check.op][r.check.dtype]
                cell[0] += r.status == "pass"
                cell[1] += 1
        rows = [{"op": op, "dtypes": {d: {"pass": p, "run": n} for d, (p, n) in sorted(cells.items())},
                 "pass": all(p == n for p, n in cells.values())} for op, cells in sorted(per.items())]
        if any(r.check.section == "records" for r in self.results):
            rows += [{"op": op, "dtypes": {}, "pass": None} for op in sorted(set(self.native_ops) - set(per))]
        return rows

    def table(self) -> dict:
        out = {}
        for s in SECTIONS:
            rs = [r for r in self.results if r.check.section == s]
            if not rs:
                continue
            counts = Counter(r.status for r in rs)
            skips = Counter(r.detail.split(":")[0].split(" (")[0] for r in rs if r.status == "skip")
            row = {k: counts.get(k, 0) for k in ("pass", "fail", "known", "skip")}
            out[s] = {**row, "total": len(rs), "skipped": dict(skips.most_common()),
                      "seconds": round(sum(r.seconds for r in rs), 1)}
        return out

    def not_written(self) -> list[dict]:
        """The kernels the backend has not written yet (glow.KernelNotWrittenError), in the order
        that unlocks the most checks: each next kernel is the one that, with those before it,
        completes the most checks held back only by missing kernels (ties: the one more checks
        need). Per kernel: `unlocks` (checks it completes there) and `needed_by` (checks that
        need it). A check needs every missing kernel among the ops of the graph it ran."""
        held = [r for r in self.results if r.status == "fail" and r.missing]
        missing = {r.missing for r in held}
        needs = [frozenset({r.missing} | (set(r.needs) & missing)) for r in held]
        needed_by = Counter(op for ops in needs for op in ops)
        order, done = [], set()
        while len(done) < len(missing):
            def gain(op):
                return sum(1 for ops in needs if op in ops and ops <= done | {op})
            best = max(sorted(missing - done), key=lambda op: (gain(op), needed_by[op]))
            order.append({"op": best, "unlocks": gain(best), "needed_by": needed_by[best]})
            done.add(best)
        return order

    def to_json(self) -> dict:
        return {"backend": self.backend, "ok": self.ok, "manifest": self.manifest(), "table": self.table(),
                "not_written": self.not_written(), "results": [r.to_json() for r in self.results]}

    def to_text(self, failures: int = 30) -> str:
        manifest = self.manifest()
        lines = [f"Support manifest for '{self.backend}': ops it runs natively, by element type "
                 "(records passed/run)"] if manifest else []
        for row in manifest:
            if row["dtypes"]:
                cells = ", ".join(f"{d} {c['pass']}/{c['run']}" for d, c in row["dtypes"].items())
                lines.append(f"  {'ok  ' if row['pass'] else 'FAIL'} {row['op']:<22} {cells}")
        unrun = [row["op"] for row in manifest if not row["dtypes"]]
        if unrun:
            lines += textwrap.wrap(", ".join(unrun), 100, initial_indent="  claimed, no record run: ",
                                   subsequent_indent="    ")
        lines += ["" if lines else f"Conformance of '{self.backend}'",
                  f"{'section':<9} {'pass':>6} {'fail':>6} {'known':>6} {'skip':>6} {'total':>6}  seconds"]
        for s, t in self.table().items():
            lines.append(f"{s:<9} {t['pass']:>6} {t['fail']:>6} {t['known']:>6} {t['skip']:>6} {t['total']:>6}"
                         f"  {t['seconds']:>7}")
            for why, n in t["skipped"].items():
                lines.append(f"{'':<9} {'':>6} {'':>6} {'':>6} {n:>6}  skipped: {why}")
        details = [r for r in self.results if r.check.section == "models" and r.status == "pass"]
        lines += [f"  {r.check.id}: {r.detail}" for r in details if r.detail]
        lines += _not_written_text(self.not_written(), sum(1 for r in self.results if r.missing))
        fails = [r for r in self.results if r.status == "fail" and not r.missing]
        if fails:
            causes = Counter(_cause(r.detail) for r in fails).most_common(10)
            lines += ["", "Most common failures:"] + [f"  {n:5d} x {why}" for why, n in causes]
        if fails and failures:
            lines += ["", f"Failures ({len(fails)}{', first ' + str(failures) if len(fails) > failures else ''}):"]
            lines += [f"  {r.check.section}/{r.check.id}: {r.detail}" for r in fails[:failures]]
        lines += ["", f"conformance of '{self.backend}': {'PASS' if self.ok else 'FAIL'}"]
        return "\n".join(lines) + "\n"


def _not_written_text(order: list[dict], held: int) -> list[str]:
    if not order:
        return []
    lines = ["", f"{len(order)} kernel(s) not written yet ({held} check(s) fail for want of them): "
             + ", ".join(k["op"] for k in order),
             "Write them in this order to pass the most checks soonest:"]
    return lines + [f"  {i:3d}. {k['op']:<14} passes {k['unlocks']:>5d} more check(s) ({k['needed_by']} need it)"
                    for i, k in enumerate(order, 1)]


#: Names of graphs, nodes and values in a failure's message: one cause per kind of failure, not per
#: check (a node case's graph is named after the case).
_NAMES = re.compile(r"\b(graph|node|value|input|output) '[^']*'")


def _cause(detail: str) -> str:
    return _NAMES.sub(lambda m: f"{m.group(1)} '…'", detail)[:200]


def summary_table(reports: list[Report], left_out: dict | None = None) -> str:
    """One line per backend (`glow conformance --all`): ops it claims (all records passed / with
    records run), then per section checks passed / run (skips not counted) and known failures."""
    head = f"{'backend':<14} {'ops':>9} {'records':>11} {'node cases':>11} {'models':>8} {'known':>6}  verdict"
    lines = [head]
    for rep in reports:
        rows = [r for r in rep.manifest() if r["dtypes"]]
        table = rep.table()

        cells = {s: "-" if t is None else f"{t['pass']}/{t['pass'] + t['fail'] + t['known']}"
                 for s, t in ((s, table.get(s)) for s in SECTIONS)}
        known = sum(t["known"] for t in table.values())
        ops = f"{sum(1 for r in rows if r['pass'])}/{len(rows)}" if rows else "-"
        lines.append(f"{rep.backend:<14} {ops:>9} {cells['records']:>11} {cells['nodes']:>11} "
                     f"{cells['models']:>8} {known:>6}  {'PASS' if rep.ok else 'FAIL'}")
    for name, why in (left_out or {}).items():
        lines.append(f"{name:<14} not checked: {why}")
    return "\n".join(lines) + "\n"
