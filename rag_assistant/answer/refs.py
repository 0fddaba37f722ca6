"""Find everything in an answer that a reader would take for a reference, and resolve it to a retrieved paper.

Shapes recognised (outside $...$ math):
  [004:17]  [004:17, 000:3]  [1]  [^1]  [paper 004:17]  [FAKE-1]  [doc_7]  [arXiv:2401.12345]
  [Smith et al., 2023]  (004:17)  (Smith et al., 2023; Lee, 2022)  (Source 2)  Smith et al. (2023)
  ^1  ^{1}  arXiv:2401.12345  doi:10.1234/x  https://arxiv.org/abs/...
A piece resolves when it is a retrieved paper id or a source label the prompt assigned ("1" -> "004:17");
every other piece of a reference is fabricated. Parenthesised bare numbers "(1)" stay prose: abstracts and
answers enumerate with them. Bracketed prose ("[see appendix]") and math ("$[0, 1]$") are not references."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

MATH = re.compile(r"\$[^$\n]*\$")
_BRACKET = re.compile(r"\^?\[\^?([^\[\]\n]{1,200})\]")
_PAREN = re.compile(r"\(([^()\n]{1,200})\)")
_AUTHOR = r"[A-Z][A-Za-z'\u00c0-\u017f\-]+(?:\s+(?:et\s+al\.?|(?:and|&)\s+[A-Z][A-Za-z'\-]+))?"
_YEAR = r"(?:19|20)\d{2}[a-z]?"
_INLINE = re.compile(
    rf"\b{_AUTHOR}\s*\({_YEAR}\)"  # Smith et al. (2023)
    r"|\barXiv:\s?\d{4}\.\d{4,5}(?:v\d+)?"
    r"|\bdoi:\s?10\.\d{4,9}/[^\s\])]*[^\s\]).,;:]"
    r"|https?://(?:www\.|dx\.)?(?:arxiv\.org|doi\.org)/[^\s\])]*[^\s\]).,;:]",
    re.IGNORECASE,
)
# A footnote marker follows a word or punctuation (maybe after one space), never a digit: 10^3 is a number.
_MARK = r"\^\{?(\d{1,3})\}?"  # not superscript digits: in abstracts "R\u00b2" and "O(n\u00b2)" are math
# keys^1^2 is one group. A mark followed by a lower-case word or ")" is math: "log^2 d", "O(n^2)".
_FOOTNOTE = re.compile(rf"(?<![\d\s^])[ ]?(?:{_MARK})+(?=\s*(?:$|[.,;:!?\[(]|[A-Z]))")
_RANGE = re.compile(r"^(\d{1,3})\s*[-\u2013]\s*(\d{1,3})$")
PREFIX = re.compile(
    r"^(?:see\s+(?:also\s+)?|cf\.?\s+|e\.g\.,?\s+)?"
    r"(?:(?:paper|source|document|doc|ref(?:erence)?|citation|id)s?\s*(?:id\s*)?(?:[:#]\s*|\s+|(?=\d)))?",
    re.IGNORECASE,
)
# A piece that looks like a reference in square brackets (and, for the strong ones, in parentheses).
_STRONG = re.compile(
    rf"^(?:[\w.\-/]*[A-Za-z0-9]:\d+"  # 004:17, zz:99
    r"|(?:arxiv:?\s*)?\d{4}\.\d{4,5}(?:v\d+)?"  # arXiv ids
    r"|(?:doi:?\s*)?10\.\d{4,9}/\S+"
    rf"|{_AUTHOR},?\s+\(?{_YEAR}\)?)$",  # Smith et al., 2023
    re.IGNORECASE,
)
_WEAK = re.compile(
    r"^(?:\d{1,3}(?:\s*[-\u2013]\s*\d{1,3})?"  # 1, 1-3
    r"|[0-9a-f]{8,}"  # hashes
    r"|[A-Za-z][A-Za-z]*[-_ ]?\d+[a-z]?"  # FAKE-1, FAKE_2, doc-7, S1
    r"|(?:paper|source|ref|reference|citation|cite|doc|document)s?(?:\s*(?:id|number|#))?|id|citation needed|\?)$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class RefSpan:
    """A reference found in a text: its span, its pieces as written, and how to show a piece in a warning."""

    start: int
    end: int
    pieces: tuple[str, ...]
    kind: str  # bracket | paren | footnote | inline

    def display(self, piece: str) -> str:
        return {"bracket": f"[{piece}]", "paren": f"({piece})", "footnote": f"^{piece}"}.get(self.kind, piece)


def mask_math(text: str) -> str:
    return MATH.sub(lambda m: " " * len(m.group(0)), text)


def split_pieces(content: str) -> list[str]:
    """'1, 3-4; Smith et al., 2023' -> ['1', '3', '4', 'Smith et al., 2023']."""
    pieces: list[str] = []
    for chunk in content.strip().lstrip("^").split(";"):
        chunk = chunk.strip()
        parts = [chunk] if _STRONG.match(chunk) else [p.strip() for p in chunk.split(",")]
        for part in filter(None, parts):
            r = _RANGE.match(part)
            if r and 0 <= int(r.group(2)) - int(r.group(1)) <= 20:
                pieces += [str(n) for n in range(int(r.group(1)), int(r.group(2)) + 1)]
            else:
                pieces.append(part)
    return pieces


class Resolver:
    """Maps reference pieces to retrieved paper ids. `labels` are the prompt's short source labels
    ("1" -> paper id); `known` are corpus ids that were not retrieved (recognised, then removed)."""

    def __init__(self, valid: Iterable[str], labels: Mapping[str, str] | None = None, known: Iterable[str] = ()):
        self.valid = set(valid)
        self.labels = {k: v for k, v in (labels or {}).items() if v in self.valid}
        self.known = set(known) | self.valid

    def resolve(self, piece: str) -> str | None:
        for candidate in (piece, PREFIX.sub("", piece).strip()):
            if candidate in self.valid:
                return candidate
            if candidate in self.labels:
                return self.labels[candidate]
        return None

    def _is_id(self, piece: str) -> bool:
        return self.resolve(piece) is not None or piece in self.known or PREFIX.sub("", piece).strip() in self.known

    def is_reference(self, content: str, kind: str = "bracket") -> bool:
        pieces = split_pieces(content)
        if not pieces:
            return False
        if kind == "bracket":
            return any(self._is_id(p) or _looks_like(p, strong_only=False) for p in pieces)
        # Parentheses hold prose more often than references: every piece must be a strong reference.
        return all(_looks_like(p, strong_only=True) or self._is_labelled(p) for p in pieces)

    def _is_labelled(self, piece: str) -> bool:
        """'(Source 2)', '(paper 004:17)': an explicit word and an id; a bare '(2)' is an enumeration."""
        stripped = PREFIX.sub("", piece).strip()
        return stripped != piece and bool(stripped) and (self._is_id(stripped) or _looks_like(stripped, False))

    def find(self, text: str) -> list[RefSpan]:
        """Every reference in `text`, in order, non-overlapping."""
        masked = mask_math(text)
        spans: list[RefSpan] = []
        for m in _BRACKET.finditer(masked):
            if self.is_reference(m.group(1), "bracket"):
                spans.append(RefSpan(m.start(), m.end(), tuple(split_pieces(m.group(1))), "bracket"))
        for m in _PAREN.finditer(masked):
            if self.is_reference(m.group(1), "paren"):
                spans.append(RefSpan(m.start(), m.end(), tuple(split_pieces(m.group(1))), "paren"))
        for m in _INLINE.finditer(masked):
            spans.append(RefSpan(m.start(), m.end(), (m.group(0),), "inline"))
        for m in _FOOTNOTE.finditer(masked):
            marks = tuple(re.findall(_MARK, m.group(0)))
            spans.append(RefSpan(m.start(), m.end(), marks, "footnote"))
        return _non_overlapping(spans)


def _looks_like(piece: str, strong_only: bool) -> bool:
    stripped = PREFIX.sub("", piece).strip()
    for candidate in (piece, stripped):
        if candidate and (_STRONG.match(candidate) or (not strong_only and _WEAK.match(candidate))):
            return True
    return False


def _non_overlapping(spans: list[RefSpan]) -> list[RefSpan]:
    """Earliest first; of overlapping spans the longest wins (a paren group around a bracket)."""
    out: list[RefSpan] = []
    for span in sorted(spans, key=lambda s: (s.start, -(s.end - s.start))):
        if out and span.start < out[-1].end:
            continue
        out.append(span)
    return out


class CitationStream:
    """Passes streamed tokens on with every [...] group held back until it closes: a reference is shown as
    the retrieved ids it names, a fabricated one not at all, prose in brackets as written. The verified
    answer replaces the stream when it ends; this keeps a fabricated id off the screen even meanwhile."""

    HOLD = 200  # an unclosed "[" longer than this is prose, not a reference

    def __init__(self, emit: Callable[[str], None], resolver: Resolver) -> None:
        self.emit = emit
        self.resolver = resolver
        self.held = ""

    def __call__(self, delta: str) -> None:
        text, out = self.held + delta, []
        while (start := text.find("[")) != -1:
            end = text.find("]", start)
            if end == -1 and len(text) - start <= self.HOLD:
                break
            end = len(text) - 1 if end == -1 else end
            out.append(text[:start] + self._show(text[start : end + 1]))
            text = text[end + 1 :]
        else:
            start = len(text)
        out.append(text[:start])
        self.held = text[start:]
        if "".join(out):
            self.emit("".join(out))

    def _show(self, group: str) -> str:
        if not group.endswith("]") or not self.resolver.is_reference(group[1:-1]):
            return group
        ids = dict.fromkeys(filter(None, map(self.resolver.resolve, split_pieces(group[1:-1]))))
        return "".join(f"[{i}]" for i in ids)
