"""Redaction hooks: a registry of named redactors run over evidence content before bounding.

Built in, in this order:

- ``api_key``: provider-style secrets (OpenAI/Anthropic, AWS, GitHub, Slack, Google, Stripe
  ``sk_live_``/``rk_live_``, Hugging Face ``hf_`` keys, JWTs), the credential of an
  ``Authorization:`` header (``Basic``, ``Bearer``, ``Digest`` ... or a bare token) and of a
  ``Bearer`` token, the password of a URL's ``scheme://user:password@host``, and the value of a
  ``key=value`` / ``key => value`` / ``key: value`` credential (``password``, ``pwd``,
  ``token``, ``api_key``, ``secret`` ..., with any prefix of name parts: ``DB_PASSWORD``,
  ``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``refresh_token``; the key quoted or not): a
  quoted value whole, spaces included, also inside a call's parentheses (``password="correct
  horse"``, ``api_key = ("abc")``, ``"client_secret": "abc def"``), else one unquoted token:
  after ``=`` any, after ``:`` of at least four characters (``password=hunter2``, ``pwd:
  abc123``: ``The password: see below`` is prose), a quoted one too unless the key was quoted
  (JSON); and a PEM or PGP private key block, armour lines included;
- ``email``: ``local@domain.tld`` with Unicode letters anywhere (``josé@example.com``,
  ``用户@example.com``, ``user@exämple.com``), the top-level domain letters or ``xn--`` punycode;
- ``card``: 13 to 19 digit numbers that pass the Luhn check, written as one run or with single
  spaces or hyphens anywhere, or in groups (4-4-4-1..7 or 4-6-4..5 digits) separated by one
  repeated separator: a dot, a no-break space, two or three spaces, or a spaced hyphen
  (``4111.1111.1111.1111``, ``4111\u00a01111\u00a01111\u00a01111``, ``4111  1111  1111  1111``);
- ``phone``.

Ordinary numbers, dates, versions and decimals are left alone: a card needs 13 to 19 digits and
the Luhn check, and a grouped card its card-shaped groups. A redactor replaces each match with
``[REDACTED:<name>]``; the record of what it did holds offsets and counts, never the matched
text. Redaction is deterministic: the same text gives the same output and records.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from aiblox.bundles.models import RedactionRecord

__all__ = [
    "Redactor",
    "RedactorRegistry",
    "default_redactors",
    "luhn_valid",
    "redact",
]

# A finder returns (start, end) spans of matches in text, sorted and non-overlapping.
Finder = Callable[[str], list[tuple[int, int]]]


@dataclass(frozen=True)
class Redactor:
    """A named redactor: ``find`` gives the spans to replace with ``replacement``."""

    name: str
    find: Finder
    replacement: str = ""

    def token(self) -> str:
        """The replacement text (``[REDACTED:<name>]`` unless given)."""
        return self.replacement or f"[REDACTED:{self.name}]"


def _regex_finder(pattern: re.Pattern[str], group: int = 0) -> Finder:
    def find(text: str) -> list[tuple[int, int]]:
        return [m.span(group) for m in pattern.finditer(text) if m.group(group)]

    return find


_EMAIL = re.compile(
    r"(?<![\w.+-])[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.(?:[^\W\d_]{2,}|xn--[a-z0-9-]+)(?![\w-])"
)
_API_KEY = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"  # OpenAI / Anthropic style
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key id
    r"|gh[pousr]_[A-Za-z0-9]{36,}"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{40,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API key
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe secret and restricted keys
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face access token
    r"|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"  # JWT
    r")"
)
# key=value / key => value / key: value credentials: redact the value only. The key may carry a
# prefix of name parts (``DB_PASSWORD``, ``MYSQL_ROOT_PASSWORD``, ``AWS_SECRET_ACCESS_KEY``,
# ``refresh_token``: a ``\b`` never follows their ``_``); a key that goes on after the credential
# word (``password_hint``) is not one. A bare ``token`` takes a prefix only in an environment
# variable's capitals (``GITHUB_TOKEN``, ``HF_TOKEN``), never a tokenizer's setting
# (``pad_token=0``, ``eos_token``). Group ``kq``: the key's closing quote (a JSON key).
_KV_KEYS = (
    r"(?:(?i:(?<![A-Za-z0-9])(?:[A-Za-z0-9]+[_-])*"
    r"(?:api[_-]?key|apikey|secret(?:[_-]?access)?(?:[_-]?key)?|access[_-]?key"
    r"|(?:access|auth|refresh|session|id|bearer)[_-]?token"
    r"|password|passwd|pwd|client[_-]?secret|private[_-]?key))"
    r"|(?<![A-Za-z0-9])(?:[A-Z0-9]+_)+TOKEN|(?i:\btoken))\b(?P<kq>[\"']?)\s*"
)
# The value: a quoted one whole, up to its closing quote on the same line (backslash escapes
# kept inside), after an optional opening parenthesis (``api_key = ("abc")``); else one token,
# which never ends in sentence punctuation: after ``=`` (or ``=>``) any, after ``:`` at least
# four characters. An unclosed quote, or one opening on a space (``"password=" + pw``), is
# skipped and the token after it taken.
_KV_QUOTED = (r"(?:\(\s*)?(?P<{0}o>[\"'])(?P<{0}>(?!\s)(?:[^\"'\\\n]|\\.|(?!(?P={0}o))[\"'])+)"
              r"(?P={0}o)")
_KV_SECRET = re.compile(
    _KV_KEYS + r"(?:(?:=>|=)\s*(?:" + _KV_QUOTED.format("qe")
    + r"|[\"']?(?P<ve>[^\s\"',;]*[^\s\"',;.:!?)]))"
    r"|:\s*(?:" + _KV_QUOTED.format("qc")
    + r"|[\"']?(?P<vc>[^\s\"',;]{3,}[^\s\"',;.:!?)])))"
)
# a PEM private key or a PGP private key block: the whole block, its armour lines included (the
# key material spans lines)
_PEM_KEY = re.compile(
    r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY( BLOCK)?-----.*?"
    r"(?:-----END \1PRIVATE KEY\2-----|\Z)", re.DOTALL)
# the password of a URL's userinfo (``postgresql://user:password@host``); the user stays
_URL_USERINFO = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@\[\]]*:"
                           r"([^\s/?#@\"'<>]+)@")
_BEARER = re.compile(r"(?i)\bBearer\s+([A-Za-z0-9._~+/=-]{16,})")
# an Authorization (or Proxy-Authorization) header: the credentials after a named scheme (a
# token; for Digest and AWS4 the rest of the line, up to a closing quote), or a bare token of at
# least eight characters; the scheme name and the header name stay
_AUTH_HEADER = re.compile(
    r"(?i)(?<![\w-])([\"']?)(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?"
    r"(?:(digest|aws4-hmac-sha256)[ \t]+|(basic|bearer|token|apikey|negotiate|ntlm)[ \t]+"
    r"|(?=[A-Za-z0-9._~+/=-]{8,}(?![^\s\"',;])))"
)
_AUTH_TOKEN = re.compile(r"[^\s\"',;]+")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
# card-shaped groups with one repeated separator: a dot, a no-break or narrow no-break space,
# two or three spaces, a spaced hyphen
_CARD_SEP = r"(\.|\u00a0|\u202f|\u2007| {2,3}| ?[-\u2010\u2011\u2012\u2013] ?)"
_CARD_GROUPED = re.compile(
    rf"(?<![\d.,-])(?:\d{{4}}{_CARD_SEP}\d{{4}}\1\d{{4}}\1\d{{1,7}}"
    rf"|\d{{4}}{_CARD_SEP}\d{{6}}\2\d{{4,5}})(?!\d|[.,]\d)"
)
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{1,4}\)[\s.-]?)?\d{2,4}(?:[\s.-]?\d{2,4}){1,4}(?!\w)"
)


def luhn_valid(digits: str) -> bool:
    """True when the digit string passes the Luhn checksum (card numbers do)."""
    if not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _merge(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _find_api_keys(text: str) -> list[tuple[int, int]]:
    spans = [m.span() for m in _API_KEY.finditer(text)]
    spans += [m.span() for m in _PEM_KEY.finditer(text)]
    spans += _find_kv_secrets(text)
    spans += [m.span(1) for m in _URL_USERINFO.finditer(text)]
    spans += [m.span(1) for m in _BEARER.finditer(text)]
    spans += _find_auth_headers(text)
    return _merge(spans)


def _find_kv_secrets(text: str) -> list[tuple[int, int]]:
    out = []
    for m in _KV_SECRET.finditer(text):
        if m.group("qc") is not None and not m.group("kq") and len(m.group("qc")) < 4:
            continue  # a short quoted value after an unquoted key and ":" is prose
        group = next(g for g in ("qe", "ve", "qc", "vc") if m.group(g) is not None)
        out.append(m.span(group))
    return out


def _find_auth_headers(text: str) -> list[tuple[int, int]]:
    out = []
    for m in _AUTH_HEADER.finditer(text):
        start = m.end()
        if m.group(2):  # Digest / AWS4: comma-separated fields to the end of the line
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
            if m.group(1):  # the header was quoted: up to the closing quote
                q = text.find(m.group(1), start, end)
                end = end if q < 0 else q
            while end > start and text[end - 1].isspace():
                end -= 1
        else:
            tok = _AUTH_TOKEN.match(text, start)
            end = tok.end() if tok else start
        if end > start and not text.startswith("[REDACTED:", start):
            out.append((start, end))
    return out


def _find_cards(text: str) -> list[tuple[int, int]]:
    out = []
    for pattern in (_CARD, _CARD_GROUPED):
        for m in pattern.finditer(text):
            digits = re.sub(r"\D", "", m.group())
            if 13 <= len(digits) <= 19 and luhn_valid(digits):
                out.append(m.span())
    return _merge(out)


def _find_phones(text: str) -> list[tuple[int, int]]:
    out = []
    for m in _PHONE.finditer(text):
        raw = m.group()
        digits = re.sub(r"\D", "", raw)
        if not 7 <= len(digits) <= 15:
            continue
        # a plain run of digits with no separators and no '+' is more likely an id or a number
        if raw.isdigit():
            continue
        # dates and version-like strings: 2024-01-15, 1.2.3
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", raw) or re.fullmatch(r"\d+(\.\d+)+", raw):
            continue
        out.append(m.span())
    return out


def default_redactors() -> list[Redactor]:
    """The built-in redactors, in the order they run."""
    return [
        Redactor("api_key", _find_api_keys),
        Redactor("email", _regex_finder(_EMAIL)),
        Redactor("card", _find_cards),
        Redactor("phone", _find_phones),
    ]


class RedactorRegistry:
    """Redactors by name, run in registration order."""

    def __init__(self, redactors: Iterable[Redactor] | None = None) -> None:
        self._redactors: dict[str, Redactor] = {}
        for r in default_redactors() if redactors is None else redactors:
            self.register(r)

    def register(self, redactor: Redactor, *, replace: bool = False) -> None:
        """Add ``redactor``; a name already taken raises unless ``replace``."""
        if redactor.name in self._redactors and not replace:
            raise ValueError(f"redactor {redactor.name!r} is already registered")
        self._redactors[redactor.name] = redactor

    def names(self) -> list[str]:
        """Registered names, in run order."""
        return list(self._redactors)

    def get(self, names: Iterable[str] | None = None) -> list[Redactor]:
        """Redactors named in ``names`` (registry order), or all when None."""
        if names is None:
            return list(self._redactors.values())
        wanted = list(names)
        unknown = [n for n in wanted if n not in self._redactors]
        if unknown:
            raise KeyError(f"unknown redactor(s) {unknown}; registered: {self.names()}")
        return [r for n, r in self._redactors.items() if n in wanted]


def _shift(spans: list[tuple[int, int]], edits: list[tuple[int, int, int]]
           ) -> list[tuple[int, int]]:
    """Map spans (sorted, not overlapping) through replacements ``(start, end, new_len)``
    (sorted, not overlapping, in the same old coordinates) in one pass over both: a span after
    an edit moves by its length change, a span overlapping edits grows to cover them. Linear:
    a text with tens of thousands of matches is redacted in milliseconds, not minutes."""
    out: list[tuple[int, int]] = []
    i = 0
    before = 0  # the length change of edits[:i], every one ending at or before the span
    for a, b in spans:
        while i < len(edits) and edits[i][1] <= a:
            s, e, n = edits[i]
            before += n - (e - s)
            i += 1
        delta_a = delta_b = before
        j = i
        while j < len(edits) and edits[j][0] < b:  # overlapping: the span grows to cover it
            s, e, n = edits[j]
            if s < a:
                delta_a -= a - s
            if e > b:
                delta_b += e - b
            delta_b += n - (e - s)
            j += 1
        out.append((a + delta_a, b + delta_b))
    return out


def redact(text: str, redactors: Iterable[Redactor],
           prior: Iterable[RedactionRecord] = ()) -> tuple[str, list[RedactionRecord]]:
    """Run ``redactors`` in order, each on the previous one's output. Returns the redacted text
    and one record per redactor that matched, with spans in the final text's offsets.

    ``prior``: records of replacements already made in ``text`` (in its offsets: a SQL cell
    redacted before it was cut, a document's chunk redacted whole before its split). They are
    carried through, their spans moved by this run's replacements, and a redactor's new spans
    are merged into its prior record; without new matches they come back as given."""
    found: list[tuple[str, str, list[tuple[int, int]]]] = [
        (p.redactor, p.replacement, sorted(p.spans)) for p in prior]
    for r in redactors:
        matches = r.find(text)
        if not matches:  # the common case (a cell of a large result): nothing more to do
            continue
        spans = _merge(matches)
        token = r.token()
        parts: list[str] = []
        new_spans: list[tuple[int, int]] = []
        edits: list[tuple[int, int, int]] = []
        pos = 0
        out_len = 0
        for s, e in spans:
            parts.append(text[pos:s])
            out_len += s - pos
            parts.append(token)
            new_spans.append((out_len, out_len + len(token)))
            edits.append((s, e, len(token)))
            out_len += len(token)
            pos = e
        parts.append(text[pos:])
        text = "".join(parts)
        found = [(name, rep, _shift(fs, edits)) for name, rep, fs in found]
        found.append((r.name, token, new_spans))
    if not found:
        return text, []
    merged: dict[str, tuple[str, list[tuple[int, int]]]] = {}
    for name, rep, sp in found:  # one record per redactor: a prior one takes its new spans
        merged[name] = (merged[name][0], _merge(merged[name][1] + sp)) if name in merged \
            else (rep, sp)
    records = [
        RedactionRecord(redactor=name, count=len(sp), spans=sp, replacement=rep)
        for name, (rep, sp) in merged.items()
    ]
    return text, records
