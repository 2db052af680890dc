"""Command-line parsing shared by every script: tyro, with its parse errors as one line.

tyro prints a bad flag (a wrong type, a value outside a Literal's choices, an unknown option, a missing argument) as a
framed, multi-line panel. The project's rule is one line on stderr naming the flag and the problem, so `parse` runs
tyro with its output captured and, when tyro refuses the command line, prints the panel's text on one line:

    error: invalid choice 'd.npz' for argument '--data'. Expected one of ('expert', 'all').

and exits with status 2 (argparse's status for a usage error). `--help` and `-h` pass through untouched.
"""

import contextlib
import io
import os
import re
import sys
from typing import Optional, Sequence, Type, TypeVar

import tyro

T = TypeVar("T")
FRAME = "╭╮╰╯│─┃━┏┓┗┛"  # the panel's border characters (rich's rounded and heavy boxes)


def one_line(panel: str) -> str:
    """The message of a tyro error panel on one line: its body's first section. On a terminal rich draws a box with
    the title in the top border; elsewhere it prints the title, a rule of dashes, the body, another rule and the
    flag's helptext. Sections are split at rules; the title stands in where there is no body."""
    lines = [raw.strip() for raw in panel.splitlines() if raw.strip()]
    title = lines.pop(0).strip(FRAME + " -") if lines else ""
    sections, current = [], []
    for line in lines:
        if line.startswith(("╰", "┗")):
            break
        text = line.strip(FRAME + " ")
        if not text.strip("-"):  # a rule
            sections.append(current)
            current = []
        else:
            current.append(text)
    sections = [s for s in sections + [current] if s]
    body = sections[0] if sections else []
    message = re.sub(r"\s+", " ", " ".join(body) or title).strip()
    return message or "could not parse the command line"


def parse(cls: Type[T], args: Optional[Sequence[str]] = None, prog: Optional[str] = None) -> T:
    """tyro.cli(cls); a refused command line prints `error: <one line>` on stderr and exits with status 2."""
    argv = list(sys.argv[1:] if args is None else args)
    if "-h" in argv or "--help" in argv:
        return tyro.cli(cls, args=argv, prog=prog)
    captured = io.StringIO()
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "1000"  # rich wraps the panel at the terminal width; a wide one keeps words whole
    try:
        with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(captured):
            return tyro.cli(cls, args=argv, prog=prog)
    except SystemExit as e:
        if e.code in (0, None):
            sys.stdout.write(captured.getvalue())
            raise
        print(f"error: {one_line(captured.getvalue())}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns
