"""The Porter stemmer, pure Python, as the Snowball project defines it (``porter.sbl``).

M. F. Porter, "An algorithm for suffix stripping", Program 14(3), 1980. This follows the
Snowball rendering of the algorithm, so it gives the same stems as ``Stemmer.Stemmer("porter")``
from PyStemmer (checked by a test where PyStemmer is installed). Input is expected lower-case.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["porter_stem"]

_V = frozenset("aeiouy")
_V_WXY = _V | frozenset("wxY")
_DOUBLES = ("bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt")

_STEP2 = {
    "tional": "tion", "enci": "ence", "anci": "ance", "abli": "able", "entli": "ent",
    "eli": "e", "izer": "ize", "ization": "ize", "ational": "ate", "ation": "ate",
    "ator": "ate", "alli": "al", "alism": "al", "aliti": "al", "fulness": "ful",
    "ousli": "ous", "ousness": "ous", "iveness": "ive", "iviti": "ive", "biliti": "ble",
}
_STEP3 = {
    "alize": "al", "icate": "ic", "iciti": "ic", "ical": "ic", "ative": "", "ful": "",
    "ness": "",
}
_STEP4 = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ou",
    "ism", "ate", "iti", "ous", "ive", "ize", "ion",
)


def _longest(word: str, suffixes: tuple[str, ...] | dict[str, str]) -> str | None:
    best = None
    for suffix in suffixes:
        if word.endswith(suffix) and (best is None or len(suffix) > len(best)):
            best = suffix
    return best


def _shortv(word: str, end: int) -> bool:
    """``word[:end]`` ends consonant (not w, x, Y), vowel, consonant."""
    return (end >= 3 and word[end - 1] not in _V_WXY and word[end - 2] in _V
            and word[end - 3] not in _V)


def _has_vowel(word: str, end: int) -> bool:
    return any(c in _V for c in word[:end])


def _regions(word: str) -> tuple[int, int]:
    n = len(word)

    def after(start: int) -> int:
        i = start
        while i < n and word[i] not in _V:
            i += 1
        while i < n and word[i] in _V:
            i += 1
        return min(i + 1, n) if i < n else n

    p1 = after(0)
    p2 = after(p1) if p1 < n else n
    return p1, p2


@lru_cache(maxsize=65536)
def porter_stem(word: str) -> str:
    """The Porter stem of a lower-case word."""
    if not word:
        return word
    chars = list(word)
    y_found = False
    if chars[0] == "y":
        chars[0] = "Y"
        y_found = True
    for i in range(1, len(chars)):
        if chars[i] == "y" and chars[i - 1] in _V:
            chars[i] = "Y"
            y_found = True
    w = "".join(chars)
    p1, p2 = _regions(w)

    # Step 1a
    suffix = _longest(w, ("sses", "ies", "ss", "s"))
    if suffix == "sses":
        w = w[:-4] + "ss"
    elif suffix == "ies":
        w = w[:-3] + "i"
    elif suffix == "s":
        w = w[:-1]

    # Step 1b
    suffix = _longest(w, ("eed", "ed", "ing"))
    if suffix == "eed":
        if len(w) - 3 >= p1:
            w = w[:-1]
    elif suffix is not None and _has_vowel(w, len(w) - len(suffix)):
        w = w[: -len(suffix)]
        if w.endswith(("at", "bl", "iz")):
            w += "e"
        elif w.endswith(_DOUBLES):
            w = w[:-1]
        elif len(w) == p1 and _shortv(w, len(w)):
            w += "e"

    # Step 1c
    if w and w[-1] in "yY" and _has_vowel(w, len(w) - 1):
        w = w[:-1] + "i"

    # Step 2
    suffix = _longest(w, _STEP2)
    if suffix is not None and len(w) - len(suffix) >= p1:
        w = w[: -len(suffix)] + _STEP2[suffix]

    # Step 3
    suffix = _longest(w, _STEP3)
    if suffix is not None and len(w) - len(suffix) >= p1:
        w = w[: -len(suffix)] + _STEP3[suffix]

    # Step 4
    suffix = _longest(w, _STEP4)
    if suffix is not None and len(w) - len(suffix) >= p2:
        if suffix != "ion":
            w = w[: -len(suffix)]
        elif len(w) > 3 and w[-4] in "st":
            w = w[:-3]

    # Step 5a
    if w.endswith("e"):
        at = len(w) - 1
        if at >= p2 or (at >= p1 and not _shortv(w, at)):
            w = w[:-1]

    # Step 5b
    if w.endswith("ll") and len(w) - 1 >= p2:
        w = w[:-1]

    return w.replace("Y", "y") if y_found else w
