"""Find everything in an answer that a reader would take for a reference, and resolve it to a retrieved paper.

Shapes recognised:
  [004:17]  [004:17, 000:3]  [1]  [^1]  [paper 004:17]  [FAKE-1]  [doc_7]  [arXiv:2401.12345]  [1](https://...)
  [Smith et al., 2023]  (004:17)  (Smith et al., 2023; Lee, 2022)  (van der Berg et al., 2023)  (Source 2)
  (doc-7)  Smith et al. (2023)  ^1  ^{1}  <sup>1</sup>  \\cite{key}  arXiv:2401.12345  arXiv 2401.12345
  doi:10.1234/x  DOI 10.1234/x  links to arxiv.org, doi.org, openreview.net and other paper hosts
A piece resolves when it is a retrieved paper id or a source label the prompt assigned ("1" -> "004:17");
every other piece of a reference is fabricated. Parenthesised bare numbers "(1)" stay prose: abstracts and
answers enumerate with them. Bracketed prose ("[see appendix]") is not a reference.

Text is read as the reader sees it: each character NFKC-normalised (full-width "［999:1］" is "[999:1]"; the
superscript and subscript digits of "R²" stay math), look-alike brackets ("【】", "⟦⟧", "〔〕") read as square
ones and angle or corner brackets ("⟨⟩", "「」") as round ones, invisible characters skipped; spans are
reported in the text's own positions. Inside a math span marked by text.clean_markup (`$[0, 1]$` shown as
"[0, 1]") only what is unmistakably a reference counts: a paper id, an arXiv id, a DOI, an author-year, a link
to a paper, or a group that is exactly one source label ("$[1]$")."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from rag_assistant.answer.redact import MASK
from rag_assistant.text import INVISIBLE, MARKUP_CLOSE, MARKUP_OPEN, MATH_CLOSE, MATH_OPEN

_BRACKET = re.compile(r"\^?\[\^?([^\[\]\n]{1,200})\]")
_LINK = re.compile(r"\[([^\[\]\n]{1,200})\]\(\s*<?([^\s()<>]{1,500})>?\s*\)")
_PAREN = re.compile(r"\(([^()\n]{1,200})\)")
_SUP = re.compile(r"<sup>\s*\[?([^<>\[\]\n]{1,60}?)\]?\s*</sup>", re.IGNORECASE)
_CITE = re.compile(r"\\(?:no)?cite[a-zA-Z]*\*?(?:\[[^\]\n]{0,80}\]){0,2}\{([^{}\n]{1,300})\}")
_PARTICLE = r"(?:van|von|der|den|de|del|della|di|da|dos|du|le|la|ter|ten|bin|ibn|al|el)"
_NAME = r"[A-Z\u00c0-\u00d6\u00d8-\u00de\u0100-\u024f\u0391-\u03a9\u0410-\u042f](?:[^\W\d_]|['\u2019\-])+"
# Case-sensitive even inside the case-insensitive patterns below: "released in (2023)" names no author.
_AUTHOR = (
    rf"(?-i:(?:{_PARTICLE}\s+)*{_NAME}(?:\s+et\.?\s*al\.?|\s+(?:and|&)\s+(?:{_PARTICLE}\s+)*{_NAME})?"
    rf"|[^\W\d_]+\s+et\.?\s*al\.?|[^\W\d_]+\s*&\s*{_NAME})"
)
_YEAR = r"(?:19|20)\d{2}[a-z]?"
_HOSTS = (
    r"arxiv\.org|doi\.org|openreview\.net|aclanthology\.org|proceedings\.mlr\.press|papers\.nips\.cc"
    r"|(?:proceedings\.)?neurips\.cc|semanticscholar\.org|dl\.acm\.org|ieeexplore\.ieee\.org|link\.springer\.com"
    r"|sciencedirect\.com|scholar\.google\.[a-z.]+|huggingface\.co/papers|paperswithcode\.com"
)
_INLINE = re.compile(
    rf"\b{_AUTHOR}\s*\({_YEAR}\)"  # Smith et al. (2023)
    r"|\barXiv(?::\s?|\s+)\d{4}\.\d{4,5}(?:v\d+)?"
    r"|\b(?:doi:?\s?)?10\.\d{4,9}/[^\s\])]*[^\s\]).,;:]"
    rf"|https?://(?:www\.|dx\.|api\.)?(?:{_HOSTS})(?:/[^\s\])]*[^\s\]).,;:])?",
    re.IGNORECASE,
)
# A footnote marker follows a word or punctuation (maybe after one space), never a digit: 10^3 is a number.
_MARK = r"\^\{?(\d{1,3})\}?"  # not superscript digits: in abstracts "R\u00b2" and "O(n\u00b2)" are math
# keys^1^2 is one group. A mark glued to a short name or a function and followed by a lower-case word or ")"
# is math ("n^2 time", "log^2 d", "O(n^2)"); one after a space or a longer word is a footnote whatever follows
# ("stores keys ^7 and values", "keys^7 and values").
_MATH_WORD = "".join(f"(?<!{f})" for f in ("log", "exp", "sin", "cos", "tan", "sinh", "cosh", "tanh", "max", "min"))
_FOOTNOTE = re.compile(
    rf"(?<![\d\s^])(?:[ ](?:{_MARK})+(?![\w^{{}}])|(?:{_MARK})+(?=\s*(?:$|[.,;:!?\[(]|[A-Z])))"
    rf"|(?<=[A-Za-z]{{3}}){_MATH_WORD}(?:{_MARK})+(?![\w^{{}}])"
)
_ENDS = re.compile(r"\s*(?:$|[.,;:!?\[])")
_RANGE = re.compile(r"^(\d{1,3})\s*[-\u2013]\s*(\d{1,3})$")
PREFIX = re.compile(
    r"^(?:see\s+(?:also\s+)?|cf\.?\s+|e\.g\.,?\s+)?"
    r"(?:(?:paper|source|document|doc|ref(?:erence)?|citation|id)s?\s*(?:id\s*)?(?:[:#]\s*|\s+|(?=\d)))?",
    re.IGNORECASE,
)
# A piece that looks like a reference in square brackets (and, for the strong ones, in parentheses).
_STRONG = re.compile(
    rf"^(?:[\w.\-/]*[A-Za-z0-9]:\d+(?:[\u2020\u2021][^\[\]]*)?"  # 004:17, zz:99, 20:3†source
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
# "(doc-7)": a reference word joined to a number is a reference in parentheses too ("(A100)" is a GPU).
_WORD_NUMBER = re.compile(r"^(?:paper|source|src|document|doc|ref|reference|citation|cite)s?[-_#]\d{1,4}$", re.I)
# Look-alike brackets, after NFKC: read as "[...]" or, for angle and corner brackets, as "(...)".
_SQUARE_PAIRS = (
    "\u27e6\u27e7\u3010\u3011\u3014\u3015\u3016\u3017\u3018\u3019\u301a\u301b\u2045\u2046\u298b\u298c\u298d\u298e"
    "\u298f\u2990\u2997\u2998"
)
_ROUND_PAIRS = (
    "\u27e8\u27e9\u3008\u3009\u300a\u300b\u300c\u300d\u300e\u300f\u27ea\u27eb\u27ec\u27ed\u27ee\u27ef\u2983\u2984"
    "\u2985\u2986\u2987\u2988\u2989\u298a\u2768\u2769\u276a\u276b\u276c\u276d\u276e\u276f\u2770\u2771\u2772\u2773"
    "\u2774\u2775"
)
_LOOKALIKE = str.maketrans(
    _SQUARE_PAIRS + _ROUND_PAIRS, "[]" * (len(_SQUARE_PAIRS) // 2) + "()" * (len(_ROUND_PAIRS) // 2)
)
_INVISIBLE = re.compile(f"[{INVISIBLE}{MARKUP_OPEN}{MARKUP_CLOSE}]")


@dataclass(frozen=True)
class RefSpan:
    """A reference found in a text: its span, its pieces as read, how to show a piece in a warning, and the
    link target a markdown link gave it."""

    start: int
    end: int
    pieces: tuple[str, ...]
    kind: str  # bracket | link | paren | footnote | sup | cite | inline
    target: str | None = None

    def display(self, piece: str) -> str:
        shapes = {"bracket": "[{}]", "link": "[{}]", "paren": "({})", "footnote": "^{}", "sup": "<sup>{}</sup>"}
        return shapes.get(self.kind, "\\cite{{{}}}" if self.kind == "cite" else "{}").format(piece)


@lru_cache(maxsize=4096)
def _fold(char: str) -> str:
    """One character as the parser reads it: NFKC, look-alike brackets as ASCII ones, nothing if invisible."""
    if _INVISIBLE.match(char):
        return ""
    if unicodedata.decomposition(char).startswith(("<super>", "<sub>")):
        return char
    return unicodedata.normalize("NFKC", char).translate(_LOOKALIKE)


@dataclass
class View:
    """A text as the parser reads it (see the module docstring): `text`, the position in the original of each
    of its characters (None: the same), and its math spans."""

    text: str
    origin: list[int] | None
    math: list[tuple[int, int]]

    @classmethod
    def of(cls, text: str) -> View:
        if text.isascii():
            return cls(text, None, [])
        chars: list[str] = []
        origin: list[int] = []
        math: list[tuple[int, int]] = []
        opened: int | None = None
        for i, char in enumerate(text):
            if char == MATH_OPEN:
                opened = len(origin)
            elif char == MATH_CLOSE and opened is not None:
                math.append((opened, len(origin)))
                opened = None
            else:
                folded = _fold(char)
                chars.append(folded)
                origin += [i] * len(folded)
        if opened is not None:
            math.append((opened, len(origin)))
        return cls("".join(chars), origin, math)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """A span of the view in the original's positions."""
        return (start, end) if self.origin is None else (self.origin[start], self.origin[end - 1] + 1)

    def in_math(self, start: int, end: int, touching: bool = False) -> bool:
        """Whether the span overlaps a math span (or, `touching`, ends or starts right at one)."""
        pad = 1 if touching else 0
        return any(s < end + pad and start - pad < e for s, e in self.math)


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
        for candidate in (piece, PREFIX.sub("", piece).strip(), re.split("[\u2020\u2021]", piece)[0]):
            if candidate in self.valid:
                return candidate
            if candidate in self.labels:
                return self.labels[candidate]
        return None

    def _is_id(self, piece: str) -> bool:
        return self.resolve(piece) is not None or piece in self.known or PREFIX.sub("", piece).strip() in self.known

    def is_reference(self, content: str, kind: str = "bracket", math: bool = False) -> bool:
        pieces = split_pieces(content)
        if not pieces:
            return False
        if math:  # "$[0, 1]$" is an interval, "$[999:1]$" a reference, "$[1]$" the source labelled 1
            strong = all(p in self.known or _looks_like(p, strong_only=True) for p in pieces)
            return strong or (len(pieces) == 1 and self.resolve(pieces[0]) is not None)
        if kind == "bracket":
            return any(self._is_id(p) or _looks_like(p, strong_only=False) for p in pieces)
        # Parentheses hold prose more often than references: every piece must be a strong reference.
        return all(_looks_like(p, strong_only=True) or self._is_labelled(p) or _WORD_NUMBER.match(p) for p in pieces)

    def _is_labelled(self, piece: str) -> bool:
        """'(Source 2)', '(paper 004:17)': an explicit word and an id; a bare '(2)' is an enumeration."""
        stripped = PREFIX.sub("", piece).strip()
        return stripped != piece and bool(stripped) and (self._is_id(stripped) or _looks_like(stripped, False))

    def find(self, text: str) -> list[RefSpan]:
        """Every reference in `text`, in order, non-overlapping, in the positions of `text`."""
        view = View.of(text)
        return _non_overlapping([RefSpan(*view.span(s, e), *rest) for s, e, *rest in self._candidates(view)])

    def _candidates(self, view: View) -> list[tuple[int, int, tuple[str, ...], str, str | None]]:
        found = list(self._groups(view))
        # math that is all reference ("$[777:1]$") is no math for what follows it
        math = View(view.text, None, [r for r in view.math if not any(f[0] <= r[0] and r[1] <= f[1] for f in found)])
        for m in _FOOTNOTE.finditer(view.text):
            # right after math it is an exponent ("$D$^2 (...)"), unless it ends a sentence ("$[0, 1]$^1.")
            after_math = math.in_math(*m.span(), touching=True) and not _ENDS.match(view.text, m.end())
            if not math.in_math(*m.span()) and not after_math:
                found.append((m.start(), m.end(), tuple(re.findall(_MARK, m.group(0))), "footnote", None))
        return found

    def _groups(self, view: View) -> Iterator[tuple[int, int, tuple[str, ...], str, str | None]]:
        text = view.text
        for kind, pattern in (("bracket", _BRACKET), ("link", _LINK), ("paren", _PAREN)):
            for m in pattern.finditer(text):
                if self.is_reference(m.group(1), "paren" if kind == "paren" else "bracket", view.in_math(*m.span())):
                    target = m.group(2) if kind == "link" else None
                    yield m.start(), m.end(), tuple(split_pieces(m.group(1))), kind, target
        for m in _INLINE.finditer(text):
            yield m.start(), m.end(), (m.group(0),), "inline", None
        for m in _CITE.finditer(text):
            yield m.start(), m.end(), tuple(p.strip() for p in m.group(1).split(",") if p.strip()), "cite", None
        for m in _SUP.finditer(text):
            pieces = tuple(split_pieces(m.group(1)))
            glued = re.search(r"(?:^|[^A-Za-z])[A-Za-z]{1,2}$|\d$", text[: m.start()])  # x<sup>2</sup>, cm<sup>2
            if pieces and not glued and not view.in_math(*m.span()) and self.is_reference(m.group(1)):
                yield m.start(), m.end(), pieces, "sup", None


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
    """Passes streamed tokens on, holding back whatever could still become a reference: the newest TAIL
    characters (an author-year or an arXiv id arrives in pieces), any group opened but not closed ("[", "(",
    "<sup>", "\\cite{") and any reference that reaches into them. What is let through has every reference the
    verifier knows shown as the retrieved ids it names, a fabricated one not at all; the client's secrets are
    masked. The verified answer replaces the stream when it ends."""

    HOLD = 200  # a group still open after this many characters is prose, not a reference
    TAIL = 32  # "van der Berg et al. (2023)" is decided only whole; ordinary prose lags by a few words

    def __init__(self, emit: Callable[[str], None], resolver: Resolver, secrets: Sequence[str] = ()) -> None:
        self.emit = emit
        self.resolver = resolver
        self.secrets = list(secrets)
        self.tail = max([self.TAIL, *(len(s) for s in self.secrets)])  # a secret is only masked once whole
        self.held = ""
        self.ended = False  # a reference list began: nothing more is shown

    def __call__(self, delta: str) -> None:
        if self.ended:
            return
        text = self.held + delta
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        spans = self.resolver.find(text)
        cut = self._cut(text, spans)
        if heading := _LIST_HEADING.search(text):  # a reference list ends the answer: the check cuts it off
            self.ended = True
            cut = min(cut, heading.start())
        self._release(text, cut, spans)

    def flush(self) -> None:
        """The stream has ended: show what is held, but a group left open (a half-written citation)."""
        text, self.held = ("", "") if self.ended else (self.held, "")
        view = View.of(text)
        opened = next((m for m in _OPENER.finditer(view.text) if _unclosed(view.text, m)), None)
        text = text[: view.span(opened.start(), opened.end())[0]] if opened else text
        self._release(text, len(text), self.resolver.find(text))

    def _release(self, text: str, cut: int, spans: list[RefSpan]) -> None:
        """Show text[:cut], each reference in it as the retrieved ids it names; hold the rest."""
        out, pos = [], 0
        for span in spans:
            if span.end > cut:
                break
            out += [text[pos : span.start], self._show(span)]
            pos = span.end
        out.append(text[pos:cut])
        self.held = text[cut:]
        if "".join(out):
            self.emit("".join(out))

    def _cut(self, text: str, spans: list[RefSpan]) -> int:
        """Where what can be shown now ends: before the tail, at a space, before an open group or a reference
        that reaches past it."""
        cut = len(text) - self.tail
        if cut <= 0:
            return 0
        word = max(text.rfind(" ", 0, cut), text.rfind("\n", 0, cut)) + 1
        if cut - word <= self.HOLD:  # a word is not split (but a "word" longer than HOLD is)
            cut = word
        view = View.of(text[:cut])
        recent = _OPENER.finditer(view.text, max(0, len(view.text) - self.HOLD))
        opened = next((m for m in recent if _unclosed(view.text, m)), None)
        if opened:
            cut = view.span(opened.start(), opened.end())[0]
        for span in spans:
            if span.start < cut < span.end:
                cut = span.start
        return cut

    def _show(self, span: RefSpan) -> str:
        if span.kind == "inline":
            return ""
        ids = dict.fromkeys(filter(None, map(self.resolver.resolve, span.pieces)))
        shown = "".join(f"[{i}]" for i in ids)
        return f" {shown}" if shown and span.kind == "footnote" else shown


_LIST_HEADING = re.compile(
    r"(?:^|(?<=[.!?])[ \t]+)[ \t]*(?:#+[ \t]*|\*\*)?(?:references|sources|citations|bibliography|works cited)"
    r"[ \t]*(?:\*\*)?[ \t]*(?::|\n)",
    re.IGNORECASE | re.MULTILINE,
)
_OPENER = re.compile(r"[\[(]|<sup|\\(?:no)?cite", re.IGNORECASE)
_CLOSER = {"[": "]", "(": ")", "<s": "</sup>", "<S": "</sup>", "\\c": "}", "\\n": "}"}


def _unclosed(text: str, opener: re.Match[str]) -> bool:
    return text.find(_CLOSER[opener.group(0)[:2]], opener.end()) == -1
