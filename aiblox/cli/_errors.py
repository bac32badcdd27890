"""Every fault of the input or the environment reaches the user as one line, in one place.

:class:`AibloxGroup` is the ``aiblox`` command group: it runs the command and turns the
project's error types and the environment's into one line ``error: <message>`` on stderr with
exit status 2, never a traceback:

- bad input: :class:`~aiblox.data.DatasetError`, sweep spec, grid, policy and vector
  import errors, pydantic validation errors, any other ``ValueError`` (the library's validation
  raises ``ValueError`` subclasses naming the file, line and field or the option), text that is
  not Unicode (``UnicodeError``);
- the environment: ``OSError`` (a read-only or missing folder, a path through a regular file,
  a full disk), a damaged or foreign DuckDB file (DuckDB's I/O, internal, fatal and permission
  errors: not its SQL errors, which are aiblox's bugs), SQLAlchemy, SQLite and
  MLflow errors, :class:`~aiblox.stores.StoreError`, an interrupted sweep, out of memory, a
  missing optional dependency (``ImportError``).

Anything else is a bug: one line ``error: internal error (Type: message)`` with the hint to set
``AIBLOX_DEBUG=1`` and exit status 1, so it is never mistaken for bad input. With
``AIBLOX_DEBUG=1`` every exception propagates with its traceback. Click's own usage errors,
``typer.Exit`` and Ctrl-C keep click's handling.

Warnings raised while a command runs (a qrels row naming an absent document, text BM25 cannot
index, ...) are printed as one line ``warning: <message>`` each. The PostgreSQL driver's own
log (psycopg's ``error ignored terminating <psycopg.Pipeline ...>`` while it cleans up after
the error the command then reports) is not shown: the error reaches the user as its one line.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from aiblox.compiled import interrupt_behind

if TYPE_CHECKING:
    from typer._click import Context

__all__ = ["AibloxGroup", "fault_message", "one_line", "print_error", "user_faults"]

DEBUG_ENV = "AIBLOX_DEBUG"


def one_line(message: str) -> str:
    """``message`` on one line: its lines joined with ``; ``, surrounding blanks dropped."""
    parts = [p.strip() for p in str(message).splitlines() if p.strip()]
    return "; ".join(parts) or "(no message)"


def print_error(message: str, prefix: str = "error") -> None:
    """``<prefix>: message`` as one line on stderr (no markup read from the message, no
    wrapping at the terminal's width; text that is not Unicode is shown escaped), printed even
    under ``aiblox --quiet``."""
    from rich.text import Text

    from aiblox.cli._console import errors

    text = one_line(message).encode("utf-8", "backslashreplace").decode("utf-8")
    style = "red" if prefix == "error" else "yellow"
    errors.print(Text.assemble((f"{prefix}:", style), " ", text), soft_wrap=True,
                  highlight=False)


def _module_error(exc: BaseException, module: str, name: str) -> bool:
    """``exc`` is an instance of ``module.name`` (looked up only when that module is already
    imported: an exception of a library that was never loaded cannot be one of its types)."""
    mod = sys.modules.get(module)
    cls = getattr(mod, name, None) if mod is not None else None
    return isinstance(cls, type) and isinstance(exc, cls)


def _os_message(exc: OSError) -> str:
    why = exc.strerror or str(exc) or type(exc).__name__
    if exc.errno == errno.EROFS:
        why = "read-only file system"
    elif exc.errno == errno.ENOSPC:
        why = "the disk is full (ENOSPC, no space left on the device)"
    elif isinstance(exc, FileExistsError | NotADirectoryError) and exc.filename is not None:
        why = f"{why} (a file where a folder is needed?)"
    where = exc.filename if exc.filename is not None else ""
    if exc.filename2 is not None:
        where = f"{where} -> {exc.filename2}"
    return f"{where}: {why}" if where else why


def store_location(exc: BaseException) -> str | None:
    """The location of the store whose method raised ``exc`` (the innermost frame of the
    traceback running a method of a store: an object with ``kind`` and ``location``)."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        obj = tb.tb_frame.f_locals.get("self")
        location = getattr(obj, "location", None)
        if isinstance(location, str) and hasattr(obj, "kind"):
            found = location
        tb = tb.tb_next
    return found


def _unicode_context(exc: UnicodeError) -> str:
    """Where in which text: `` in 'caf\\udce9 au lait'`` (an argument that was not UTF-8, a
    string from a file)."""
    obj, start, end = (getattr(exc, k, None) for k in ("object", "start", "end"))
    if not isinstance(obj, str | bytes) or not isinstance(start, int):
        return ""
    end = end if isinstance(end, int) else start + 1
    return f" in {obj[max(0, start - 30):end + 30]!r}"


def _validation_message(exc: Any) -> str:
    errors = exc.errors()
    parts = [f"{'.'.join(str(x) for x in e.get('loc', ())) or exc.title}: {e.get('msg')}"
             for e in errors[:5]]
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return f"invalid {exc.title}: " + "; ".join(parts) + more


def fault_message(exc: BaseException) -> str | None:
    """The one-line message of an input or environment fault, or None when ``exc`` is none
    of those (a bug)."""
    from aiblox.stores.base import StoreError, is_disk_full

    msg: str | None = None
    full = is_disk_full(exc)
    if _module_error(exc, "pydantic", "ValidationError"):
        msg = _validation_message(exc)
    elif isinstance(exc, UnicodeError):
        msg = f"text that is not valid Unicode: {exc}{_unicode_context(exc)}"
    elif isinstance(exc, OSError):
        msg = _os_message(exc)
    elif any(_module_error(exc, "duckdb", name) for name in _DUCKDB_ENVIRONMENT):
        where = store_location(exc)
        msg = f"DuckDB{f' store {where}' if where else ''}: {exc}" + (
            "" if full else " (a damaged or foreign database file? check --db)")
    elif _module_error(exc, "sqlalchemy.exc", "SQLAlchemyError"):
        msg = f"database: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    elif _module_error(exc, "sqlite3", "Error"):
        msg = f"SQLite: {exc} (check the tracking store's folder and --tracking-uri)"
    elif _module_error(exc, "mlflow.exceptions", "MlflowException"):
        msg = f"MLflow: {getattr(exc, 'message', None) or exc}"
    elif isinstance(exc, StoreError | ValueError):
        msg = str(exc) or type(exc).__name__
    elif _module_error(exc, "aiblox.engine.tracking", "SweepInterrupted"):
        msg = str(exc)
    elif isinstance(exc, MemoryError):
        msg = "out of memory" + (f": {exc}" if str(exc) else "")
    elif isinstance(exc, ImportError):
        msg = f"{exc} (a missing optional dependency? the README lists the extras)"
    if msg is None:
        return None
    if full and "ENOSPC" not in msg:
        msg += " (the disk is full: ENOSPC)"
    return one_line(_masked(msg))


_DUCKDB_ENVIRONMENT = ("OperationalError", "InternalError", "PermissionException",
                       "FatalException", "InterruptException")
"""DuckDB's errors of the file and the machine (I/O, a damaged block, locks, memory): the
others (SQL that does not bind or parse, a conversion, a constraint) are aiblox's bugs."""

def _masked(text: str) -> str:
    """``text`` with every URL's password as ``***`` (:func:`aiblox.inputs.mask_url_passwords`)."""
    from aiblox.inputs import mask_url_passwords

    return mask_url_passwords(text)


def _cli_control(exc: BaseException) -> bool:
    """typer's and click's own exceptions (``typer.Exit``, usage errors, abort): their
    handling stays theirs."""
    return type(exc).__module__.split(".", 1)[0] in ("typer", "click")


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    print_error(str(message), prefix="warning")


DRIVER_LOGGERS = ("psycopg",)
"""Loggers of database drivers whose warnings are secondary to the error a command reports:
psycopg logs an ``error ignored ...`` warning for a second error met while it ends a pipeline,
copy or transaction that the first one aborted (Python's last-resort handler printed it to
stderr, before the command's own ``error:`` line)."""


@contextmanager
def _quiet_driver_log(quiet: bool) -> Iterator[None]:
    """While a command runs (``quiet``; not under ``AIBLOX_DEBUG=1``), the drivers' loggers
    (:data:`DRIVER_LOGGERS`) pass only their errors; their levels are restored after."""
    loggers = [logging.getLogger(name) for name in DRIVER_LOGGERS] if quiet else []
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(lg.getEffectiveLevel(), logging.ERROR))
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


@contextmanager
def user_faults() -> Iterator[None]:
    """Run a command: faults of input and environment become ``error: ...`` and exit 2, other
    exceptions one ``internal error`` line and exit 1 (tracebacks with ``AIBLOX_DEBUG=1``);
    warnings become ``warning: ...`` lines."""
    debug = os.environ.get(DEBUG_ENV, "") not in ("", "0")
    with warnings.catch_warnings(), _quiet_driver_log(not debug):
        if not debug:
            warnings.showwarning = _show_warning
        try:
            yield
        except Exception as exc:
            if debug or _cli_control(exc):
                raise
            if interrupt_behind(exc) is not None:  # a Ctrl-C a C extension wrapped: a Ctrl-C
                raise KeyboardInterrupt from exc
            message = fault_message(exc)
            if message is not None:
                print_error(message)
                raise typer.Exit(2) from None
            print_error(f"internal error ({type(exc).__name__}: {one_line(str(exc))}); rerun "
                        f"with {DEBUG_ENV}=1 for the traceback")
            raise typer.Exit(1) from None


class AibloxGroup(TyperGroup):
    """The ``aiblox`` group: every subcommand (nested groups included) runs under
    :func:`user_faults`."""

    def invoke(self, ctx: Context) -> Any:
        with user_faults():
            return super().invoke(ctx)

    def make_context(self, info_name: str | None, args: list[str],
                     parent: Context | None = None, **extra: Any) -> Context:
        from aiblox.cli._groups import tidy_help

        tidy_help(self)  # before any --help is printed, at any depth
        return super().make_context(info_name, args, parent, **extra)

