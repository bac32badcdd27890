"""TREC run files, read and written by trec_eval's rules, so a run file means one ranking in
aiblox, trec_eval, ``pytrec_eval`` and ir-measures.

A run file holds ``qid Q0 docid rank score tag`` lines. trec_eval orders a query's lines by
score, descending, ties broken by document id, descending (``strcmp``: byte order, which is
Unicode code point order for UTF-8), and ignores the rank column (``get_trec_results.c``,
``form_res_rels.c``). trec_eval 9 (the one ``pytrec_eval``, and so ir-measures, runs) keeps a
score as a 32-bit float: two scores that differ only beyond single precision are a tie there
(trec_eval 10 keeps doubles). aiblox breaks ties the other way (score descending, id ascending:
the order :mod:`aiblox.fusion` and the retrievers give), and every RRF list has ties.

Writing (:func:`trec_run_text`): each query's hits in aiblox's order, the score column made
strictly decreasing in single precision by :func:`trec_scores`: a score is written as it is
when it is below the one written above it as 32-bit floats, else as the next 32-bit float below
that one (ties at 0.5 are written 0.5, 0.49999997, 0.49999994, ...: a few parts in 10^8
apart). trec_eval 9 and 10, ``pytrec_eval`` and ir-measures then meet no tie and read the
written order whatever the ids; a list whose scores already decrease in single precision is
written unchanged. Scores are written with ``repr``, so they read back exactly.
:func:`aiblox.engine.evaluate.run_hash` hashes the written scores, so a run written and read back
has the run hash of the run it was written from.

Reading (:func:`read_trec_run`) follows trec_eval 9 (``pytrec_eval``, ir-measures), with a
warning naming the file wherever it applied a rule the file may not have meant:

- order: score descending as 32-bit floats, ties by document id descending; warned about when
  some query's scores differ only beyond single precision (trec_eval 10 orders those by score);
- the score is a decimal number in C's syntax (``strtod``'s, as trec_eval reads it: an
  optional sign, ASCII digits with an optional decimal point, an optional exponent), finite,
  and within single precision's range (``1e39`` is infinite as trec_eval 9 keeps it, where
  every such score ties; :data:`~aiblox.fusion.types.MAX_SCORE`); anything else is refused
  when the file is read, naming the file, line and field: Python's ``float`` read
  ``1_5`` as 15 (``strtod`` reads 1) and took Arabic-Indic or full-width digits; a
  hexadecimal score (``0x10``, which ``strtod`` reads) is refused, to be written in decimal;
- the rank column must be an integer (an optional sign and ASCII digits) and is otherwise
  ignored, as by trec_eval (warned about when it orders some query otherwise);
- a document listed twice for a query: its last line is kept, as ``pytrec_eval`` and
  ir-measures keep it (their run is a ``{doc: score}`` mapping; trec_eval itself refuses such a
  file, "duplicate docs", ``form_res_rels.c``). Warned about with the count, the query, the
  document and the lines. A run file's lines are scored lines, not a ranked list (the rank
  column is ignored), so this follows the scoring tools, not fusion's rule for a ranked list
  (:func:`aiblox.fusion.types.first_occurrences`: the first entry); the run read holds each
  document once, so nothing read here reaches fusion with a repeat;
- ``#`` comment lines and blank lines are skipped (trec_eval 10 skips comments).

The scoring side (:func:`aiblox.experiment.table.system_from_run`) warns about queries of the
run that the split does not judge (ignored, as by trec_eval) and judged queries with no line
(scored 0 and averaged over every judged query, as ``trec_eval -c`` and ir-measures do).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aiblox.fusion.types import MAX_SCORE
from aiblox.inputs import InputFileError, bounded_lines

__all__ = ["RunFileError", "check_finite_scores", "float32_scores", "read_trec_run",
           "run_file_lines", "run_file_stem", "score_problem", "trec_order", "trec_run_text",
           "trec_scores"]


class RunFileError(ValueError):
    """A TREC run file that cannot be read: the message is one line naming the file and line."""


def float32_scores(scores: Sequence[float]) -> list[float]:
    """``scores`` as trec_eval 9 keeps them: rounded to 32-bit floats (given as doubles; one
    beyond single precision's range is infinite)."""
    with np.errstate(over="ignore"):
        return np.asarray(scores, dtype=np.float64).astype(np.float32).tolist()


def trec_scores(scores: Sequence[float]) -> list[float]:
    """``scores`` (one query's, best first) made strictly decreasing as 32-bit floats, so
    trec_eval reads the list's order: each one as it is when its single-precision value is
    below the one written before it, else the next 32-bit float below that one (written as its
    shortest decimal: 0.49999997 below 0.5). Scores that already decrease in single precision
    come back unchanged. A score past :data:`~aiblox.fusion.types.MAX_SCORE` (or not a number)
    is a ``ValueError``."""
    arr = np.asarray(scores, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        low = arr.astype(np.float32)
    if not bool(np.isfinite(low).all()):
        at = int(np.flatnonzero(~np.isfinite(low))[0])
        raise ValueError(f"score {float(arr[at])!r} at rank {at + 1} is past the largest run "
                         f"score {MAX_SCORE:.8g} (a 32-bit float, as a TREC run file's order "
                         f"is read), where scores tie")
    if bool((low[1:] < low[:-1]).all()):  # no tie: nothing to write otherwise
        return arr.tolist()
    out: list[float] = []
    prev = math.inf  # the single-precision value of the score written last
    for s, s32 in zip(arr.tolist(), low.tolist(), strict=True):
        if s32 < prev or not out:
            w, prev = float(s), s32
        else:  # a tie (or a rise) in single precision: just below the score written above
            below = np.nextafter(np.float32(prev), np.float32(-np.inf))
            prev, w = float(below), float(str(below))  # its shortest decimal: 0.49999997
            if np.float32(w) != below:  # that decimal read as a double rounds elsewhere
                w = prev
        out.append(w)
    return out


def trec_order(hits: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """``hits`` in trec_eval 9's order: score descending as 32-bit floats, ties by document
    id descending."""
    keys = float32_scores([h[1] for h in hits])
    order = sorted(range(len(hits)), key=lambda i: (keys[i], hits[i][0]), reverse=True)
    return [hits[i] for i in order]


def check_finite_scores(hits: Sequence[tuple[str, float]], qid: str, where: str) -> None:
    """``ValueError`` naming ``where``, the query and the document of the first score in
    ``hits`` that is not a finite number, or is past the largest run score (a 32-bit float,
    :data:`~aiblox.fusion.types.MAX_SCORE`): a run given as scores is ordered by them in
    single precision (:func:`trec_order`), and a NaN has no place in that order, nor an
    infinity there (``1e39`` and ``2e39`` tie, and :func:`trec_run_text` cannot write them)."""
    for doc, score in hits:
        problem = "is not a finite number" if not math.isfinite(score) else _past_range(score)
        if problem is not None:
            raise ValueError(f"{where}: query {qid!r}, document {doc!r}: score {score!r} "
                             f"{problem}")


def _past_range(score: float) -> str | None:
    """Why a finite ``score`` is refused as a run score, or None: past the 32-bit range in
    which run files are ordered (:func:`trec_scores` refuses to write it)."""
    if -MAX_SCORE <= score <= MAX_SCORE or math.isfinite(float32_scores([score])[0]):
        return None  # (a double just past MAX_SCORE may round down to it in single precision)
    end = "largest" if score > 0 else "lowest"
    return (f"is past the {end} run score {math.copysign(MAX_SCORE, score):.8g} (a 32-bit "
            f"float, as a TREC run file's order is read, where scores past it tie)")


def run_file_stem(name: str) -> str:
    """A system name as a run file's name and its lines' tag (one token): every character but
    letters, digits, ``-_.@`` an ``_`` (``a:b`` and ``a#b`` are both ``a_b``)."""
    return "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name) or "run"


def trec_run_text(run: Mapping[str, Sequence[Sequence[Any]]], tag: str) -> str:
    """A run in TREC format, ``qid Q0 doc rank score tag`` per line: queries sorted by id, each
    query's hits in their ranked order, scores made strictly decreasing (:func:`trec_scores`)
    and written with ``repr`` so they read back exactly; whitespace in ``tag`` is written
    ``_``. Raises ``ValueError`` for an id that a whitespace-separated line cannot carry
    (empty, or holding whitespace) or a score that is not a finite number."""
    tag = "_".join(tag.split()) or "run"
    lines = []
    for qid in sorted(run):
        hits = run[qid]
        if hits:
            _check_field(qid, "query id")
        scores = trec_scores([h[1] for h in hits])
        for rank, (hit, score) in enumerate(zip(hits, scores, strict=True), start=1):
            doc = hit[0]
            if not isinstance(doc, str) or doc.split() != [doc]:
                _check_field(str(doc), f"document id (query {qid!r})")
            if not math.isfinite(score):
                raise ValueError(f"cannot write a TREC run: query {qid!r}, document {doc!r}: "
                                 f"score {score!r} is not a finite number")
            lines.append(f"{qid} Q0 {doc} {rank} {score!r} {tag}")
    return "\n".join(lines) + ("\n" if lines else "")


def _check_field(value: str, what: str) -> None:
    """Refuse a field a whitespace-separated line cannot carry."""
    if value.split() != [value]:
        raise ValueError(f"cannot write a TREC run: the {what} {value!r} is empty or holds "
                         f"whitespace, which a whitespace-separated run line cannot carry")


_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A decimal number as C's ``strtod`` reads one whole (ASCII only)."""
_INTEGER = re.compile(r"[+-]?[0-9]+")
_NOT_FINITE = re.compile(r"[+-]?(?:inf|infinity|nan)", re.IGNORECASE)
_HEX = re.compile(r"[+-]?0[xX]")


def score_problem(score: str) -> str | None:
    """Why a run line's score field is refused (see the module doc), or None: the one rule
    for a score given as text, in a run file or as data (a run frame's text column)."""
    if _DECIMAL.fullmatch(score):
        value = float(score)
        return _past_range(value) if math.isfinite(value) else "is not a finite number"
    if _NOT_FINITE.fullmatch(score):
        return "is not a finite number"
    if _HEX.match(score):
        return ("is hexadecimal: write it as a decimal number (an optional sign, ASCII "
                "digits, a decimal point, an exponent)")
    return ("is not a decimal number (an optional sign, ASCII digits, a decimal point, an "
            "exponent: C's syntax, as trec_eval reads it)")


def read_trec_run(path: str | Path) -> dict[str, list[tuple[str, float]]]:
    """A TREC run file (``qid Q0 docid rank score tag`` per line, whitespace separated) as
    ``{qid: [(doc, score), ...]}``, queries sorted by id, each query's hits in trec_eval's
    order (see the module doc: score descending as 32-bit floats, ties by document id
    descending; a document listed twice keeps its last line; warnings say where a rule was
    applied, naming the file, query, document and lines). Raises :class:`RunFileError` naming
    the file and the first bad line (not 6 columns, a rank that is not an integer, a score that
    is not a finite decimal number or is past the largest run score), or an unreadable or empty
    file: before any scoring."""
    p = Path(path)
    rows: dict[str, dict[str, tuple[float, int, int]]] = {}  # qid -> doc -> (score, rank, line)
    twice: list[tuple[int, str, str, int]] = []  # (line, qid, doc, line it repeats)
    for lineno, line in run_file_lines(p):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != 6:
            raise RunFileError(f"--run {p}:{lineno}: expected 6 columns 'qid Q0 docid rank "
                               f"score tag', got {len(fields)}: {line.strip()[:80]!r}")
        qid, _q0, doc, rank, score, _tag = fields
        if not _INTEGER.fullmatch(rank):
            raise RunFileError(f"--run {p}:{lineno}: rank {rank!r} is not an integer")
        r = int(rank)
        problem = score_problem(score)
        if problem is not None:
            raise RunFileError(f"--run {p}:{lineno}: score {score!r} {problem}")
        s = float(score)
        docs = rows.setdefault(qid, {})
        if doc in docs:
            twice.append((lineno, qid, doc, docs.pop(doc)[2]))  # re-inserted: the last line
        docs[doc] = (s, r, lineno)
    if not rows:
        raise RunFileError(f"--run {p}: no run lines (expected 'qid Q0 docid rank score tag')")
    if twice:
        lineno, qid, doc, first = twice[0]
        warnings.warn(
            f"--run {p}: {_count(len(twice), 'line repeats', 'lines repeat')} a document "
            f"already listed for its query (e.g. line {lineno}: query {qid!r}, document "
            f"{doc!r}, first at line {first}); each document keeps its last line, as "
            f"pytrec_eval and ir-measures read it (trec_eval itself refuses such a file)",
            stacklevel=2)
    run: dict[str, list[tuple[str, float]]] = {}
    reranked: list[str] = []
    finer: list[tuple[str, str, float, str, float]] = []  # trec_eval 10 would order these
    for qid in sorted(rows):
        docs = rows[qid]
        hits = trec_order([(doc, s) for doc, (s, _r, _n) in docs.items()])
        ranks = [docs[doc][1] for doc, _ in hits]
        if any(b < a for a, b in zip(ranks, ranks[1:], strict=False)):
            reranked.append(qid)
        up = next(((a, b) for a, b in zip(hits, hits[1:], strict=False) if b[1] > a[1]), None)
        if up is not None:
            finer.append((qid, *up[0], *up[1]))
        run[qid] = hits
    if finer:
        qid, a, sa, b, sb = finer[0]
        warnings.warn(
            f"--run {p}: {_count(len(finer), 'query holds', 'queries hold')} scores that differ "
            f"only beyond single precision (e.g. query {qid!r}: document {a!r} {sa!r}, "
            f"document {b!r} {sb!r}); ordered as trec_eval 9, pytrec_eval and ir-measures "
            f"order them (32-bit scores: a tie, by document id descending); trec_eval 10 "
            f"orders them by their full score", stacklevel=2)
    if reranked:
        warnings.warn(
            f"--run {p}: the rank column orders {_count(len(reranked), 'query', 'queries')} "
            f"otherwise than trec_eval does (e.g. {reranked[0]!r}); scored in trec_eval's "
            f"order, which ignores the rank column: score descending, ties by document id "
            f"descending", stacklevel=2)
    return run


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def run_file_lines(path: Path) -> Iterator[tuple[int, str]]:
    """The numbered lines of a run file, read in bounded memory
    (:func:`aiblox.inputs.bounded_lines`): :class:`RunFileError` naming the file (and line) for
    one that is not a regular file (``/dev/zero``, a FIFO), a line too long, text that is not
    UTF-8, or a read that fails. A UTF-8 byte-order mark opening the file is not part of its
    first line (a file saved "UTF-8 with BOM" read its first query id with the mark before it, and
    that line was dropped as a query the dataset does not have)."""
    lineno = 0
    try:
        for lineno, raw in bounded_lines(path):
            try:
                text = raw.decode("utf-8")
                yield lineno, text.removeprefix("\ufeff") if lineno == 1 else text
            except UnicodeDecodeError as exc:
                raise RunFileError(f"--run {path}:{lineno}: cannot read it: {exc}") from None
    except InputFileError as exc:
        where = f"{path}:{exc.line}" if exc.line is not None else str(path)
        raise RunFileError(f"--run {where}: cannot read it: {exc.reason}") from None
    except OSError as exc:
        where = f"{path}:{lineno + 1}" if lineno else str(path)
        raise RunFileError(f"--run {where}: cannot read it: {exc.strerror or exc}") from None
