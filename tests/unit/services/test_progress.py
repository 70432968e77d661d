"""Progress output: JSON Lines when stderr is not a terminal, bars on a terminal."""

import io
import json

from graft.services.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_not_a_terminal_gives_one_json_line_per_event():
    stream = io.StringIO()
    progress = Progress(stream)
    progress.emit("step", step=0, of=2, smol=0.25)
    progress.emit("toy_data", train=40)
    assert [json.loads(line) for line in stream.getvalue().splitlines()] == [
        {"event": "step", "step": 0, "of": 2, "smol": 0.25},
        {"event": "toy_data", "train": 40},
    ]


def test_a_terminal_gets_bars_with_counts_and_latest_values():
    stream = Terminal()
    progress = Progress(stream)
    for step in range(3):
        progress.emit("step", step=step, of=3, smol=0.1 * step)
    for done in (1, 2):
        progress.emit("eval_benchmark", model="qwen", checkpoint=10, benchmark="add", done=done, of=2, pass1=0.5)
    progress.emit("toy_model", model="smol", seconds=4.2)
    text = stream.getvalue()
    assert "train" in text and "3/3" in text and "smol=0.2" in text
    assert "evaluate qwen 10" in text and "2/2" in text
    assert "toy_model: model=smol seconds=4.2" in text
    assert "{" not in text  # no JSON on a terminal
    assert progress.bars == {}  # finished bars are closed
