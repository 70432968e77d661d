"""Progress a person can read on a terminal, and JSON Lines a machine can read everywhere else.

``emit(event, **fields)`` is how long work reports. When stderr is not a terminal (Snakemake logs, Slurm) every
event is one JSON line, as it always was. On a terminal, events that count toward a total (``step``/``of``:
training steps, warm-up steps, evaluated checkpoints) drive a tqdm bar per kind and model with the latest
values and an ETA; other events print as one readable line.
"""

from __future__ import annotations

import json
import sys

from tqdm import tqdm

COUNTED = {
    "step": ("train", "step", 1),
    "warmup": ("warm-up", "step", 0),
    "eval_benchmark": ("evaluate", "done", 0),
    "import_step": ("import", "step", 1),
}
"""Events that advance a bar: its label, the field that counts, and 1 where that field is an index."""


class Progress:
    def __init__(self, stream=None):
        self._stream = stream
        self.bars: dict[tuple[str, str], tqdm] = {}

    @property
    def stream(self):
        """The given stream, else stderr as it is now (tests and callers may replace sys.stderr)."""
        return self._stream or sys.stderr

    @property
    def terminal(self) -> bool:
        return self.stream.isatty()

    def emit(self, event: str, **fields) -> None:
        if not self.terminal:
            print(json.dumps({"event": event, **fields}), file=self.stream, flush=True)
            return
        if event in COUNTED and "of" in fields and COUNTED[event][1] in fields:
            self._advance(event, fields)
        else:
            text = " ".join(f"{k}={v}" for k, v in fields.items())
            tqdm.write(f"{event}: {text}", file=self.stream)

    def _advance(self, event: str, fields: dict) -> None:
        label, counter, offset = COUNTED[event]
        model = " ".join(str(fields[k]) for k in ("model", "checkpoint") if k in fields)
        key = (event, model)
        bar = self.bars.get(key)
        if bar is None:
            bar = tqdm(total=fields["of"], desc=f"{label} {model}".strip(), file=self.stream, dynamic_ncols=True)
            self.bars[key] = bar
        done = fields[counter] + offset
        bar.update(max(0, done - bar.n))
        rest = {k: v for k, v in fields.items() if k not in (counter, "of", "model", "checkpoint")}
        if rest:
            bar.set_postfix(rest, refresh=False)
        bar.refresh()
        if bar.n >= bar.total:
            bar.close()
            del self.bars[key]

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()
