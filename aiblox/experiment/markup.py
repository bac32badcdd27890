"""Table markup for the experiment table: Markdown rows and LaTeX text, escaped."""

from __future__ import annotations

__all__ = ["letters", "md_escape", "md_table", "plural", "tex_escape"]


def md_table(head: list[str], rows: list[list[str]], left: int = 1) -> list[str]:
    """A Markdown table: the first ``left`` columns aligned left, the others right."""
    return ["| " + " | ".join(md_escape(h) for h in head) + " |",
            "|" + "|".join(["---"] * left + ["---:"] * (len(head) - left)) + "|",
            *("| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows)]


def md_escape(text: str) -> str:
    """Markdown table text: ``|`` escaped."""
    return text.replace("|", "\\|")


_TEX = {"\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "$": "\\$", "#": "\\#",
        "_": "\\_", "{": "\\{", "}": "\\}", "~": "\\textasciitilde{}",
        "^": "\\textasciicircum{}", "<": "\\textless{}", ">": "\\textgreater{}",
        "|": "\\textbar{}"}
"""LaTeX's special characters, and the ones its default (OT1) font encoding prints as other
glyphs (``>`` as ``¿``, ``<`` as ``¡``, ``|`` as an em dash): a pipeline's ``bm25 >> rm3``."""


def tex_escape(text: str) -> str:
    """LaTeX text with its special characters escaped."""
    return "".join(_TEX.get(c, c) for c in text)


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 query``, ``2 queries``: ``n`` and the word in its number."""
    return f"{n} {word}" if n == 1 else f"{n} {words or word + 's'}"


def letters(i: int) -> str:
    """``a`` .. ``z``, then ``aa``, ``ab``, ...: the i-th system's letter (from 0) in a
    pairwise table."""
    out = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        out = chr(ord("a") + r) + out
    return out
