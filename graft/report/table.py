"""A table of the report, rendered as Markdown, CSV and LaTeX with one formatting rule for missing cells."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

from graft.results import write_text

MISSING = "—"


@dataclass
class Table:
    name: str
    caption: str
    header: list[str]
    rows: list[list[object]]

    def cells(self) -> list[list[str]]:
        return [[_fmt(v) for v in row] for row in self.rows]

    def markdown(self) -> str:
        lines = [f"**{self.caption}**", "", "| " + " | ".join(self.header) + " |", "|" + "---|" * len(self.header)]
        lines += ["| " + " | ".join(row) + " |" for row in self.cells()]
        return "\n".join(lines) + "\n"

    def csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(self.header)
        for row in self.rows:
            writer.writerow(["" if v is None else f"{v:.4f}" if isinstance(v, float) else _fmt(v) for v in row])
        return out.getvalue()

    def latex(self) -> str:
        esc = lambda s: s.replace("_", r"\_").replace("%", r"\%").replace("±", r"$\pm$")  # noqa: E731
        lines = [
            r"\begin{table}[t]",
            r"\centering",
            r"\caption{" + esc(self.caption) + "}",
            r"\begin{tabular}{" + "l" + "r" * (len(self.header) - 1) + "}",
            r"\toprule",
            " & ".join(esc(h) for h in self.header) + r" \\",
            r"\midrule",
        ]
        lines += [" & ".join(esc(c) for c in row) + r" \\" for row in self.cells()]
        lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
        return "\n".join(lines) + "\n"

    def write(self, directory: Path) -> list[Path]:
        renderings = ((".md", self.markdown()), (".csv", self.csv()), (".tex", self.latex()))
        return [write_text(directory / f"{self.name}{suffix}", text) for suffix, text in renderings]


def _fmt(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, tuple) and len(value) == 2:
        return f"[{value[0]:+.2f}, {value[1]:+.2f}]"
    return str(value)
