"""Every shell command a page shows: the README's, CONTRIBUTING.md's and those of the pages under docs/ and
bench/results/ (fenced ``bash``, ``sh``, ``shell`` and ``console`` blocks, and commands in inline code in the prose),
and those in the comments of the configs under config/ and bench/results/. tests/unit/test_page_commands.py checks
each one and tests/integration/test_page_dry_runs.py runs each Snakemake command as a dry run."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FENCES = ("bash", "sh", "shell", "console")
"""The languages of a fenced block whose lines are commands; a block of another language, or none, shows output,
a file or a listing."""

PROGRAMS = (
    "snakemake",
    "graft",
    "python",
    "python3",
    "pytest",
    "pip",
    "bash",
    "sbatch",
    "tmux",
    "ruff",
    "snakefmt",
    "lint-imports",
)
"""The programs whose name opens a command in inline code or in a config's comment; any other words there are
prose. In a fenced block every line is a command, whatever its program."""

SEPARATORS = ("&&", "||", ";", "|")

PLACEHOLDER = re.compile(r"<[\w .-]+>")
"""A word the reader fills in, such as ``<config>``: not a redirection."""


@dataclass(frozen=True)
class PageCommand:
    """One command as a page shows it: ``text`` with its continuation lines joined and its comment removed, one
    command of an ``&&`` chain each."""

    page: str
    line: int
    text: str
    inline: bool = False
    """In the prose (inline code): it may name a command and some of its options without every argument it needs."""

    @property
    def words(self) -> list[str]:
        """The command's words as the shell splits them (no expansion), redirections left out."""
        words, skip = [], False
        for word in shlex.split(self.text):
            if skip:
                skip = False
            elif re.fullmatch(r"\d?(>>?|<)", word):
                skip = True
            elif not re.match(r"\d?(>>?|<)", word) or PLACEHOLDER.fullmatch(word):
                words.append(word)
        return words

    @property
    def program(self) -> str:
        return self.words[0]

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def _outside_quotes(text: str):
    """(index, character, inside quotes) of each character of ``text``, as the shell quotes it."""
    quote = None
    escaped = False
    for i, char in enumerate(text):
        yield i, char, quote is not None or escaped
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote is None and char in "'\"":
            quote = char
        elif char == quote:
            quote = None


def strip_comment(text: str) -> str:
    """``text`` without its shell comment: a ``#`` outside quotes at the start or after a space."""
    for i, char, quoted in _outside_quotes(text):
        if char == "#" and not quoted and (i == 0 or text[i - 1].isspace()):
            return text[:i].rstrip()
    return text.rstrip()


def split_chain(text: str) -> list[str]:
    """The commands of a chain (``&&``, ``||``, ``;``, ``|``), each stripped."""
    parts, start, skip = [], 0, 0
    for i, _char, quoted in _outside_quotes(text):
        if skip:
            skip -= 1
            continue
        if quoted:
            continue
        for sep in SEPARATORS:
            if text.startswith(sep, i):
                parts.append(text[start:i])
                start = i + len(sep)
                skip = len(sep) - 1
                break
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def _joined(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Lines with their ``\\`` continuations joined: (number of the first line, text)."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, line in lines:
        if pending is not None:
            number, line = pending[0], pending[1] + " " + line.strip()
        if line.rstrip().endswith("\\"):
            pending = (number, line.rstrip()[:-1].rstrip())
            continue
        pending = None
        out.append((number, line))
    if pending is not None:
        out.append(pending)
    return out


def _commands(page: str, lines: list[tuple[int, str]], inline: bool = False) -> list[PageCommand]:
    found = []
    for number, line in _joined(lines):
        for part in split_chain(strip_comment(line)):
            found.append(PageCommand(page, number, part, inline))
    return found


def _opens_a_command(text: str) -> bool:
    return text.split(" ", 1)[0] in PROGRAMS and " " in text


def markdown_commands(path: Path, root: Path = ROOT) -> list[PageCommand]:
    """The commands of a Markdown page: every line of its fenced shell blocks (in a ``console`` block, the lines
    after a ``$`` prompt), and each inline code span of its prose that opens with a program of ``PROGRAMS`` and
    holds more than its name."""
    page = str(path.relative_to(root))
    text = path.read_text()
    found: list[PageCommand] = []
    prose = []
    block: list[tuple[int, str]] | None = None
    language = ""
    for number, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"\s*```(\w*)", line)
        if fence and block is None:
            block, language = [], fence.group(1)
            prose.append("")
            continue
        if fence:
            if language in FENCES:
                found += _commands(page, block)
            block = None
            prose.append("")
            continue
        if block is None:
            prose.append(line)
            continue
        prose.append("")
        if language == "console":
            if line.lstrip().startswith("$ "):
                block.append((number, line.lstrip()[2:]))
            elif block and block[-1][1].rstrip().endswith("\\"):
                block.append((number, line))
        elif line.strip():
            block.append((number, re.sub(r"^\s*\$ ", "", line)))
    body = "\n".join(prose)
    for span in re.finditer(r"(?<!`)`([^`]+)`(?!`)", body):
        code = " ".join(span.group(1).split())
        if _opens_a_command(code):
            number = body.count("\n", 0, span.start()) + 1
            found += [PageCommand(page, number, part, inline=True) for part in split_chain(code)]
    return sorted(found, key=lambda c: c.line)


def config_commands(path: Path, root: Path = ROOT) -> list[PageCommand]:
    """The commands in a config's comments: a comment line indented by two spaces or more that opens with a program
    of ``PROGRAMS`` (with its ``\\`` continuations), inline code that opens with one, and a ``snakemake`` command
    that follows a colon to the end of its line."""
    page = str(path.relative_to(root))
    comments = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        match = re.match(r"\s*#(.*)$", line) or re.search(r"\s#(.*)$", line)
        if match:
            comments.append((number, match.group(1)))
    found: list[PageCommand] = []
    block: list[tuple[int, str]] = []
    for number, text in comments:
        continued = bool(block) and block[-1][1].rstrip().endswith("\\")
        if continued or (re.match(r"\s{2,}\S", text) and _opens_a_command(text.strip())):
            block.append((number, text.strip()))
            continue
        found += _commands(page, block)
        block = []
        for span in re.finditer(r"`([^`]+)`", text):
            if _opens_a_command(span.group(1)):
                found += _commands(page, [(number, span.group(1))], inline=True)
        if after := re.search(r":\s+(snakemake .*)$", text):
            found += _commands(page, [(number, after.group(1))])
    found += _commands(page, block)
    return found


def page_files(root: Path = ROOT) -> list[Path]:
    """The pages whose commands are checked: the Markdown pages and the configs."""
    pages = [root / "README.md", root / "CONTRIBUTING.md", *sorted((root / "docs").glob("*.md"))]
    pages.append(root / "bench" / "results" / "README.md")
    return pages + sorted((root / "config").rglob("*.yaml")) + sorted((root / "bench" / "results").glob("*.yaml"))


def page_commands(root: Path = ROOT) -> list[PageCommand]:
    """Every command of every page, in page order."""
    found = []
    for path in page_files(root):
        found += markdown_commands(path, root) if path.suffix == ".md" else config_commands(path, root)
    return found


STAND_INS = {
    "my.yaml": "config/examples/own-pair.yaml",
    "my-pair.yaml": "config/examples/own-pair.yaml",
    "N": "2",
    "<config>": "config/config.yaml",
    "<preset>": "graft",
    "NAME": "graft",
}
"""What a check reads for each placeholder word of a page: the reader's own config is the worked example's, the
reader's number of cores 2, a preset graft."""

MADE_BY_A_PAGE = {"/tmp/rehearsal-ci.yaml": ("python", ".ci/rehearsal_subset.py")}
"""Files that a command of the same page writes before the command that reads them: the word, and the command that
writes it (with the path to write appended)."""

SUBSTITUTION = re.compile(r"\$\((.*?)\)")


def stood_in(words: list[str]) -> list[str]:
    """``words`` with each placeholder replaced by its stand-in (``STAND_INS``)."""
    return [STAND_INS.get(word, word) for word in words]


def shell_words(text: str, cwd: Path, substitute: bool) -> list[str]:
    """The words of a command without its redirections as bash expands them in ``cwd`` (braces, quotes, and a
    command substitution, which runs there, or, where ``substitute`` is false, stands as one word)."""
    if not substitute:
        text = SUBSTITUTION.sub(lambda m: shlex.quote(f"$({m.group(1)})"), text)
    text = PLACEHOLDER.sub(lambda m: shlex.quote(m.group(0)), text)
    text = re.sub(r"\s\d?(>>?|<)\s*[^\s<>]+(?=\s|$)", "", text)
    done = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {text}"], cwd=cwd, capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout.split("\0")[:-1]


def snakemake_options() -> dict[str, argparse.Action]:
    """Each option string of Snakemake's command line and its action."""
    from snakemake.cli import get_argument_parser

    return {name: action for action in get_argument_parser()._actions for name in action.option_strings}


READS_SEVERAL = ("*", "+", "?")
"""The nargs of options that take every word after them up to the next option (``?``: the next word, if any)."""

RULES_OR_FILES = ("forcerun", "until", "omit_from", "allowed_rules", "prioritize", "quiet")
"""The options whose values a target could be (rules, files, or ``--quiet``'s ``all``): with several values and no
target before them, one of them is likely the target."""

CONFIG_FILE = re.compile(r".*\.(ya?ml|json)$")


def swallowed(args: list[str]) -> list[str]:
    """Where Snakemake's arguments ``args`` (the words after ``snakemake``) read a target as the value of an option
    that takes several words (``--configfile``, ``--config``, ``--forcerun``, ``--quiet``...), or a target comes after
    such an option, one line each; the pages put every target first."""
    options = snakemake_options()
    problems: list[str] = []
    targets: list[str] = []
    after: str | None = None  # the first option so far that takes several words
    taking: tuple[str, argparse.Action] | None = None  # the option whose values the next words are
    values: dict[str, list[str]] = {}
    words = iter(args)
    for word in words:
        if word.startswith("-") and len(word) > 1:
            name, eq, _ = word.partition("=")
            action = options.get(name)
            if action is None:
                problems.append(f"{name}: no such option of Snakemake")
                taking = None
                continue
            taking = None
            if action.nargs in READS_SEVERAL and not eq:
                after = after or name
                taking = (name, action)
                values.setdefault(name, [])
            elif action.nargs is None and not eq:
                next(words, None)
            continue
        if taking is not None:
            name, action = taking
            values[name].append(word)
            if action.nargs == "?":
                taking = None
            continue
        if after is not None:
            problems.append(f"target {word!r} comes after {after}: put the targets first")
        targets.append(word)
    for name, taken in values.items():
        dest = options[name].dest
        for word in taken:
            if dest == "configfile" and not CONFIG_FILE.match(word):
                problems.append(f"{name} reads {word!r} as a config file: put the targets first")
            elif dest == "config" and "=" not in word:
                problems.append(f"{name} reads {word!r} as a setting: put the targets first")
        if dest in RULES_OR_FILES and len(taken) > 1 and not targets:
            problems.append(f"{name} reads {' '.join(taken)!r}, the command no target: put the targets first")
    return problems


WORKFLOW = ("Snakefile", "rules", "config", "workflow", "envs", "slurm")
"""What Snakemake and graft read of the repository when a page's command runs from its root."""

READ_ONLY = ("bench", ".ci")
"""What a page's command may run or read besides, linked into a copy of the workflow."""


def reader_files(root: Path) -> None:
    """What the pages leave to the reader, written under ``root``: the worked example's problems (its
    ``my_data/``), and the reader's own config (``my.yaml``, ``my-pair.yaml``) as the worked example."""
    rows = [{"id": f"p{i}", "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(8)]
    (root / "my_data").mkdir(exist_ok=True)
    for split in ("train", "validation"):
        (root / "my_data" / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    for name, path in STAND_INS.items():
        if name.endswith(".yaml"):
            shutil.copyfile(root / path, root / name)


def workflow_copy(dest: Path) -> Path:
    """A copy of the repository's workflow at ``dest``, with the files a reader brings (``reader_files``): a
    command run there as from the repository root writes nothing into the checkout (no .snakemake/, no results/)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW:
        source = ROOT / name
        if source.is_symlink():
            (dest / name).symlink_to(source.readlink())
        elif source.is_dir():
            shutil.copytree(source, dest / name, symlinks=True)
        else:
            shutil.copyfile(source, dest / name)
    for name in READ_ONLY:
        (dest / name).symlink_to(ROOT / name)
    reader_files(dest)
    return dest
