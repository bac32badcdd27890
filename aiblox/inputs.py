"""What users hand aiblox besides its options, read so that a bad one is refused in the user's
own terms: input files read in bounded memory, and environment variables.

- Files (corpus, queries, qrels, answers, dataset manifests, run files): only a regular file is
  read (a device such as ``/dev/zero``, a FIFO or a folder is refused before a byte is read), and
  line by line, no line longer than :data:`MAX_LINE_BYTES` (a file without line breaks is refused
  at its first line instead of filling memory). :class:`InputFileError` names the file (as the
  user gave it, with what it links to) and the line; each reader turns it into its own error
  type.
- Environment variables (``AIBLOX_*``): :class:`EnvVarError` names the variable, its value and
  what is expected; :func:`env_seconds` reads a duration.
"""

from __future__ import annotations

import gzip
import math
import os
import re
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

__all__ = [
    "EnvVarError",
    "InputFileError",
    "MAX_FILE_BYTES",
    "MAX_LINE_BYTES",
    "bounded_lines",
    "check_regular_file",
    "env_seconds",
    "has_url_password",
    "mask_url_passwords",
    "read_bounded",
]

MAX_LINE_BYTES = 64 * 2**20
"""Longest line (64 MiB) of an input file: longer than any document, query or run line, short
enough to hold in memory."""

MAX_FILE_BYTES = 16 * 2**20
"""Largest small file read whole (a dataset's ``*.toml`` manifest): 16 MiB."""


class InputFileError(ValueError):
    """An input file that is not read: ``path``, ``line`` (1-based; None for the whole file) and
    ``reason`` (why); the message is ``path[:line]: cannot read: reason``."""

    def __init__(self, path: str | Path, line: int | None, reason: str) -> None:
        where = f"{path}{f':{line}' if line is not None else ''}"
        super().__init__(f"{where}: cannot read: {reason}")
        self.path, self.line, self.reason = str(path), line, reason


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


def check_regular_file(path: str | Path) -> None:
    """Raise :class:`InputFileError` unless ``path`` is (or links to) a regular file: a device
    (``/dev/zero`` never ends), a FIFO (blocks), a socket or a folder is refused before any
    read; a missing or unreadable path names the OS's reason."""
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except OSError as exc:
        raise InputFileError(p, None, str(exc.strerror or exc)) from None
    if not stat.S_ISREG(mode):
        target = os.path.realpath(p)
        via = f" ({target})" if target != str(p) and target != os.path.abspath(p) else ""
        raise InputFileError(p, None, f"{_kind(mode)}{via}, not a regular file")


def bounded_lines(path: str | Path, *, gz: bool = False,
                  max_line: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes)`` of each line of the regular file ``path`` (line break kept;
    decompressed first when ``gz``), never reading more than ``max_line`` bytes into one line:
    :class:`InputFileError` for a file that is not regular (:func:`check_regular_file`) or a
    line longer than that (naming the line). OS and decompression errors propagate (the
    caller names them with its file)."""
    check_regular_file(path)
    opener = gzip.open if gz else open
    with opener(path, "rb") as fh:
        lineno = 0
        while True:
            raw = fh.readline(max_line + 1)
            if not raw:
                return
            lineno += 1
            if len(raw) > max_line:
                raise InputFileError(path, lineno, f"a line longer than {max_line} bytes (no "
                                                   f"line break: not a text file of lines?)")
            yield lineno, raw


def read_bounded(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them:
    :class:`InputFileError` for a file that is not regular or larger."""
    check_regular_file(path)
    with open(path, "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputFileError(path, None, f"larger than {max_bytes} bytes (not the small text "
                                         f"file expected here?)")
    return data


class EnvVarError(ValueError):
    """An environment variable whose value aiblox cannot use: the message names the variable,
    the value (``shown=False`` for a secret) and what is expected."""

    def __init__(self, name: str, value: str, expected: str, shown: bool = True) -> None:
        said = repr(value) if shown else "(the value, not shown)"
        super().__init__(f"environment variable {name}={said}: expected {expected}")
        self.name, self.expected = name, expected


def env_seconds(name: str, default: float, environ: Mapping[str, str] | None = None) -> float:
    """A duration in seconds from the variable ``name`` (``default`` when it is unset or empty):
    a finite number > 0, else :class:`EnvVarError`."""
    env = os.environ if environ is None else environ
    raw = env.get(name, "")
    if not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise EnvVarError(name, raw, f"a finite number of seconds > 0 (unset: {default:g})")
    return value


_USERINFO_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^:/@\s'\"]*:)[^@\s'\"]*@")
_QUERY_PASSWORD = re.compile(r"([?&](?i:password|sslpassword)=)[^&#\s'\"]*")
_KEYWORD_PASSWORD = re.compile(
    r"(?<![\w/.?&+-])((?i:sslpassword|password)\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s'\"]+)")
"""A libpq connection string's ``password=VALUE`` (``host=h password='a b'``), never a word of
a path (``data/password=x.duckdb``) or a URL's query (masked by :data:`_QUERY_PASSWORD`)."""


def mask_url_passwords(text: str) -> str:
    """``text`` with the password of every URL in it shown as ``***``: a userinfo's
    (``scheme://user:password@host``), libpq's ``password=`` and ``sslpassword=`` query
    parameters (which SQLAlchemy's own masking leaves in clear) and a libpq connection
    string's ``password=VALUE``. One rule for every URL shown: a store in an error or a result
    line, an LLM endpoint in a settings error, a driver's message. Only those parts are
    masked, never the password's text elsewhere (a short password is a piece of many
    words)."""
    masked = _QUERY_PASSWORD.sub(r"\1***", _USERINFO_PASSWORD.sub(r"\1***@", text))
    return _KEYWORD_PASSWORD.sub(r"\1***", masked)


def has_url_password(text: str) -> bool:
    """Whether ``text`` holds a URL's password, in clear or already masked: what
    :func:`mask_url_passwords` masks (a masked one too: a command naming it cannot run as
    written)."""
    return any(r.search(text) for r in (_USERINFO_PASSWORD, _QUERY_PASSWORD, _KEYWORD_PASSWORD))
