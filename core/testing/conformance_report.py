"""The conformance kit's report: the support manifest (per claimed op, its element types with records
passed/run) and the pass table (per section: pass, fail, known, skip and why), as text or JSON."""

from __future__ import annotations

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

    def to_json(self) -> dict:
        return {"backend": self.backend, "ok": self.ok, "manifest": self.manifest(), "table": self.table(),
                "results": [r.to_json() for r in self.results]}

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
        fails = [r for r in self.results if r.status == "fail"]
        if fails:
            causes = Counter(r.detail[:200] for r in fails).most_common(10)
            lines += ["", "Most common failures:"] + [f"  {n:5d} x {why}" for why, n in causes]
        if fails and failures:
            lines += ["", f"Failures ({len(fails)}{', first ' + str(failures) if len(fails) > failures else ''}):"]
            lines += [f"  {r.check.section}/{r.check.id}: {r.detail}" for r in fails[:failures]]
        lines += ["", f"conformance of '{self.backend}': {'PASS' if self.ok else 'FAIL'}"]
        return "\n".join(lines) + "\n"
