"""A table of the report: a DataFrame of raw values (floats, strings, intervals, None for missing), written as
Markdown, CSV and LaTeX by pandas with one formatting rule for each."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from graft.results import write_text

MISSING = "—"


def _fmt(value: object) -> str:
    """Markdown and LaTeX: two decimals, intervals as [+low, +high], missing as a dash (never as zero)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, tuple) and len(value) == 2:
        return f"[{value[0]:+.2f}, {value[1]:+.2f}]"
    return str(value)


def _csv(value: object) -> str:
    """CSV: four decimals, missing as an empty field."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.4f}" if isinstance(value, float) else _fmt(value)


def _latex(text: str) -> str:
    return text.replace("_", r"\_").replace("%", r"\%").replace("±", r"$\pm$")


@dataclass
class Table:
    name: str
    caption: str
    frame: pd.DataFrame

    @classmethod
    def from_rows(cls, name: str, caption: str, header: list[str], rows: list[list[object]]) -> Table:
        return cls(name, caption, pd.DataFrame(rows, columns=header, dtype=object))

    @property
    def header(self) -> list[str]:
        return list(self.frame.columns)

    @property
    def rows(self) -> list[list[object]]:
        return self.frame.to_numpy().tolist()

    def markdown(self) -> str:
        body = self.frame.map(_fmt).to_markdown(index=False, disable_numparse=True)
        return f"**{self.caption}**\n\n{body}\n"

    def csv(self) -> str:
        return self.frame.map(_csv).to_csv(index=False)

    def latex(self) -> str:
        cells = self.frame.map(lambda v: _latex(_fmt(v))).rename(columns=_latex)
        return cells.to_latex(
            index=False,
            escape=False,
            caption=_latex(self.caption),
            column_format="l" + "r" * (len(self.header) - 1),
            position="t",
        )

    def write(self, directory: Path) -> list[Path]:
        renderings = ((".md", self.markdown()), (".csv", self.csv()), (".tex", self.latex()))
        return [write_text(directory / f"{self.name}{suffix}", text) for suffix, text in renderings]
