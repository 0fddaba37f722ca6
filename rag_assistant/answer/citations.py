"""Resolve every reference in an answer to a retrieved paper or remove and report it (refs.py), flag uncited
sentences and score how well each cited abstract supports its sentence.

Support score (offline, 0..1) of sentence s against abstract A:
    0.5 * max cosine(s, a) over the sentences a of A   (all-MiniLM-L6-v2, the index's model; the vectors of A's
                                                        sentences are the ones stored at ingest, analysis.py)
  + 0.5 * share of s's content words that occur in A    (Snowball stems; stop words and citations removed)
A sentence copied from A scores 1.0; a faithful paraphrase ~0.6-0.8; an unrelated claim < 0.35."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from rag_assistant.answer.models import AnswerWarning, Reference, SentenceCheck, WarningKind
from rag_assistant.answer.quotes import is_trimmed_quote, quote_text, quoted_paper
from rag_assistant.answer.refs import PREFIX, RefSpan, Resolver
from rag_assistant.corpus.fields import byline
from rag_assistant.corpus.models import Paper
from rag_assistant.text import (
    MARKUP_CLOSE,
    MARKUP_OPEN,
    MATH_CLOSE,
    MATH_OPEN,
    clean_markup,
    split_sentences,
    stems,
    unmark,
)

if TYPE_CHECKING:
    from rag_assistant.answer.analysis import PaperView

NOT_FOUND = "The corpus does not cover this question."
_NOT_FOUND_LETTERS = "thecorpusdoesnotcoverthisquestion"
_FILLER = 12  # letters around the phrase still counted as "only the phrase" ("Answer:", "Sorry,")
_REF_LIST = re.compile(
    r"^[ \t]*(?:#+[ \t]*|\*\*)?(?:references|sources|citations|bibliography|works cited)[ \t]*:?[ \t]*(?:\*\*)?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
# "References: [1] Smith et al. ..." on one line (or after a sentence): the heading, then a reference first
_REF_LIST_INLINE = re.compile(
    r"(?:^|(?<=[.!?])[ \t]+)[ \t]*(?:#+[ \t]*|\*\*)?"
    r"(?:references|sources|citations|bibliography|works cited)[ \t]*(?:\*\*)?[ \t]*:[ \t]*",
    re.IGNORECASE | re.MULTILINE,
)
_LINK_DEFINITION = re.compile(r"^[ \t]*\[\^?[^\]\n]{1,80}\]:.*$\n?", re.MULTILINE)
_EMPTY_GROUP = re.compile(r"\(\s*(?:see(?:\s+also)?|cf\.?|e\.g\.,?)?[\s,;]*\)|\[\s*\]")
_BRACKETED = re.compile(r"\[([^\[\]]+)\]")
_EMPTY_MARKS = re.compile(f"{MATH_OPEN}{MATH_CLOSE}|{MARKUP_OPEN}{MARKUP_CLOSE}")  # "$[999:1]$" once removed
_CITE_AT_START = re.compile(r"\[([^\[\]]+)\]\s*")
# A list item's marker: "- ", "* ", "• ", "1. ", "1) ", "a) ", "(2) "
_LIST_MARK = re.compile(r"[ \t]*(?:[-*+\u2022\u2023\u25e6\u2043]|\d{1,3}[.)]|[a-z][.)]|\((?:\d{1,3}|[a-z])\))[ \t]+")


Notes = list[AnswerWarning]
Exempt = Callable[[str], bool]  # a sentence that needs no citation (a heading, a question's restatement)
_removed = partial(AnswerWarning, WarningKind.REMOVED)  # a reference the check removed, named in the detail


@dataclass
class Verified:
    text: str
    sentences: list[SentenceCheck]
    citations: list[str]
    warnings: Notes


def _tidy(text: str) -> str:
    text = _EMPTY_GROUP.sub("", text)
    return re.sub(r"\s+([.,;:!?])", r"\1", re.sub(r"[ \t]{2,}", " ", text)).strip()


def normalize(text: str, resolver: Resolver | None = None) -> str:
    """Move references written after the full stop ("... memory. [004:17]") before it -- on the same line
    only: a citation that starts a new line or paragraph is never carried back across the break."""
    resolver = resolver or Resolver(())
    spans = [s for s in resolver.find(text) if s.kind != "inline"]  # "Smith et al. (2023)" starts a sentence
    out: list[str] = []
    pos = i = 0
    while i < len(spans):
        j = i
        while j + 1 < len(spans) and not text[spans[j].end : spans[j + 1].start].strip(" \t"):
            j += 1
        before = text[pos : spans[i].start].rstrip(" \t")
        item = re.search(r"(?:^|\n)[ \t]*\d{1,3}\.$", text[: spans[i].start].rstrip(" \t"))  # "1. [1] Claim."
        if before and before[-1] in ".!?" and not before.endswith("et al.") and not item:
            stop = re.match(r"[ \t]*[.!?]", text[spans[j].end :])
            out.append(f"{before[:-1]} {text[spans[i].start : spans[j].end]}{before[-1]}")
            pos = spans[j].end + (stop.end() if stop else 0)
        else:
            out.append(text[pos : spans[j].end])
            pos = spans[j].end
        i = j + 1
    return "".join(out) + text[pos:]


def parse_citations(text: str, known: set[str]) -> list[str]:
    """Every piece of every bracketed reference in the text as shown (clean_markup), in order of appearance
    (duplicates kept); an interval in math (`$[0, 1]$`) is no reference."""
    resolver = Resolver(known)
    return [
        resolver.resolve(p) or PREFIX.sub("", p).strip()
        for span in resolver.find(clean_markup(text, mark=True))
        if span.kind == "bracket"
        for p in span.pieces
    ]


def strip_citations(text: str, known: set[str] | Resolver) -> str:
    """The text without any reference (valid or not)."""
    resolver = known if isinstance(known, Resolver) else Resolver(known)
    for span in reversed(resolver.find(text)):
        text = text[: span.start] + text[span.end :]
    return _tidy(re.sub(r"\s+", " ", text))


def is_not_found(text: str, resolver: Resolver) -> bool:
    """True when the text is (essentially) only the not-found phrase, however often it is repeated."""
    letters = re.sub(r"[^a-z]", "", strip_citations(text, resolver).lower())
    rest = letters.replace(_NOT_FOUND_LETTERS, "")
    return rest != letters and len(rest) <= _FILLER


def _rewrite(sentence: str, resolver: Resolver) -> tuple[str, list[str], Notes]:
    """Every reference becomes its retrieved ids in brackets, or nothing. Returns text, kept ids, and a warning
    for each piece dropped (named as written) and each link target dropped. Removing a reference can make
    another ("arXiv:2402.01234^7" leaves "^7"): the text is read again until none is left but those kept."""
    kept: list[str] = []
    notes: Notes = []
    for _ in range(4):
        spans = [s for s in resolver.find(sentence) if s.kind != "bracket" or sentence[s.start : s.end] not in kept]
        if not spans:
            break
        sentence = _tidy(_EMPTY_MARKS.sub("", _replace(sentence, spans, resolver, kept, notes)))
    return sentence, [k[1:-1] for k in kept], notes


def _replace(sentence: str, spans: list[RefSpan], resolver: Resolver, kept: list[str], notes: Notes) -> str:
    """The sentence with each span replaced by the retrieved ids it names, each id once ("[004:17]" in `kept`)."""
    replacements = []
    for span in spans:
        good = []
        for piece in span.pieces:
            pid = None if span.kind == "inline" else resolver.resolve(piece)
            if pid is None:
                notes.append(_removed(f"removed citation {span.display(piece)}: not among the retrieved papers"))
            elif f"[{pid}]" not in kept:
                kept.append(f"[{pid}]")
                good.append(f"[{pid}]")
        if span.target:
            shown = "".join(map(span.display, span.pieces))
            notes.append(
                _removed(f"removed the link target of citation {shown} ({span.target}): a citation names a paper")
            )
        gap = " " if span.kind in ("footnote", "sup") and good else ""  # "keys^1" -> "keys [004:17]"
        replacements.append((span.start, span.end, gap + "".join(good)))
    for start, end, repl in reversed(replacements):
        sentence = sentence[:start] + repl + sentence[end:]
    return sentence


def _as_sentence(piece: str, valid: Mapping[str, Paper], last: bool = False) -> str:
    """Shown as one sentence that re-splits as one: citations at the end, a capital, a full stop (or, last on
    its line, a colon: "Two findings:" before a list). Only the citations the check wrote move ("[004:17]
    Claim." -> "Claim [004:17]."): an abstract's own "[bold]" stays."""
    cites, rest = [], piece
    while (lead := _CITE_AT_START.match(rest)) and lead.group(1) in valid:
        cites.append(f"[{lead.group(1)}]")
        rest = rest[lead.end() :]
    if cites and rest.strip():
        body = rest.strip()
        stop = body[-1] if body[-1] in ".!?" else ""
        piece = f"{body[: len(body) - len(stop)].rstrip()} {''.join(cites)}{stop}"
    if piece[:1].islower():
        piece = piece[0].upper() + piece[1:]
    stops = ".!?:" if last else ".!?"
    ended = re.search(rf"[{stops}][\"')\]{MATH_CLOSE}{MARKUP_CLOSE}]*$", piece)  # "... $x.$" ends too
    return piece if ended else piece + "."


def _cut_reference_lists(text: str, resolver: Resolver) -> tuple[str, Notes]:
    """A trailing "References:" block (or line) and markdown link definitions ("[1]: ...", hidden when
    rendered)."""
    warnings = []
    heading = _REF_LIST.search(text)
    if not (heading and text[heading.end() :].strip()):
        heading = next(
            (m for m in _REF_LIST_INLINE.finditer(text) if _starts_with_reference(text, m.end(), resolver)), None
        )
    if heading:
        text = text[: heading.start()]
        warnings.append(
            _removed("removed a reference list at the end of the answer (citations belong in the sentences)")
        )
    text, n = _LINK_DEFINITION.subn("", text)
    if n:
        warnings.append(_removed(f"removed {n} reference definition line(s) ('[label]: ...')"))
    return text, warnings


def _starts_with_reference(text: str, at: int, resolver: Resolver) -> bool:
    line = text[at:].split("\n", 1)[0]
    spans = resolver.find(line)
    return bool(spans) and not line[: spans[0].start].strip()


def _items(paragraph: str) -> list[tuple[str, list[str]]]:
    """The paragraph's list items as (marker, lines); text before the first marker is an item without one."""
    items: list[tuple[str, list[str]]] = []
    for line in paragraph.split("\n"):
        mark = _LIST_MARK.match(line)
        if mark or not items:
            items.append((mark.group(0).strip() + " " if mark else "", [line[mark.end() :] if mark else line]))
        else:
            items[-1][1].append(line)
    return items


def _standing_alone(line: str, resolver: Resolver) -> Notes | None:
    """Warnings for a line that holds references and nothing else ("[1]" between two sentences: it cites
    neither), None for any other line."""
    spans = resolver.find(line)
    if not spans or re.search(r"\w", unmark(strip_citations(line, resolver))):
        return None
    warnings = []
    for span in spans:
        for piece in span.pieces:
            pid = None if span.kind == "inline" else resolver.resolve(piece)
            if pid is None:
                warnings.append(_removed(f"removed citation {span.display(piece)}: not among the retrieved papers"))
            else:
                warnings.append(_removed(f"removed citation [{pid}] standing alone on its line: it cites no sentence"))
    return warnings


Embed = Callable[[list[str]], np.ndarray]


class SupportScorer:
    """Scores claims against abstracts, read from their `views` (analysis.py: sentences, their vectors stored at
    ingest, stems); a paper without a view is analysed here, its sentences embedded (a scorer without an index)."""

    def __init__(self, embed: Embed, views: Sequence[PaperView] = ()) -> None:
        self.embed = embed
        self._views = {v.paper_id: v for v in views}
        self._cache: dict[str, tuple[np.ndarray, set[str], frozenset[str]]] = {}

    def _load(self, papers: Sequence[Paper]) -> None:
        for paper in {p.paper_id: p for p in papers if p.paper_id not in self._cache}.values():
            view = self._views.get(paper.paper_id)
            sentences = view.sentences if view else split_sentences(paper.text)
            vecs = view.vectors if view else self.embed(sentences)
            # an answer's claims are checked as shown (LaTeX made readable): an abstract's words and sentences
            # count both as stored and as shown
            shown = unmark(clean_markup(paper.text, mark=True))
            words = set(view.stems if view else stems(f"{paper.title or ''} {paper.text}")) | set(stems(shown))
            if not len(vecs):  # no sentence: the whole text, as one
                vecs = self.embed([paper.text])
            quotes = [*sentences, *(unmark(clean_markup(s, mark=True)) for s in sentences)]
            self._cache[paper.paper_id] = (vecs, words, frozenset(quotes))

    def score_many(self, claims: list[str], papers: list[Paper]) -> list[float]:
        """Support of claims[i] by papers[i], the claims batched in one embedding call. A claim that is one of
        its paper's sentences word for word (a quote: every extractive answer), or a quote trimmed of its opening
        (quotes.py), has cosine 1 without embedding."""
        if not claims:
            return []
        self._load(papers)
        quoted = [c in self._cache[p.paper_id][2] for c, p in zip(claims, papers, strict=True)]
        quoted = [q or is_trimmed_quote(c, p.text) for q, c, p in zip(quoted, claims, papers, strict=True)]
        fresh = iter(self.embed([c for c, q in zip(claims, quoted, strict=True) if not q]))
        out = []
        for claim, is_quote, paper in zip(claims, quoted, papers, strict=True):
            sent_vecs, words, _ = self._cache[paper.paper_id]
            vec = None if is_quote else next(fresh)
            cosine = 1.0 if vec is None else float(np.max(sent_vecs @ vec)) if len(sent_vecs) else 0.0
            claim_words = stems(claim)
            coverage = sum(w in words for w in claim_words) / len(claim_words) if claim_words else 0.0
            out.append(round(max(0.0, min(1.0, 0.5 * max(cosine, 0.0) + 0.5 * coverage)), 4))
        return out


def verify(
    text: str,
    sources: Sequence[Paper],
    scorer: SupportScorer,
    support_threshold: float,
    known_ids: set[str] | None = None,
    exempt: Exempt = lambda s: False,
    labels: Mapping[str, str] | None = None,
    quotes: bool = False,
) -> Verified:
    """Check an answer against the papers it may cite. Every reference (any shape, see refs.py) becomes the
    retrieved paper id it names -- `labels` maps the prompt's short source labels -- or is removed and
    reported. `known_ids` are corpus ids that were not retrieved, recognised as citations (and removed).
    The text checked is the text shown: its markup is made readable first (clean_markup), so `$[999:1]$`,
    shown as "[999:1]", is checked as the reference it reads as; `$[0, 1]$` stays an interval. With `quotes`
    (an offline answer), a sentence that is an exact span of the abstract it cites is kept as written, its own
    references too (quotes.py); any other sentence is checked as always."""
    papers = {p.paper_id: p for p in sources}
    resolver = Resolver(papers, labels, known_ids or ())
    body, warnings = _cut_reference_lists(clean_markup(text.strip(), mark=True), resolver)
    checks: list[SentenceCheck] = []
    paragraphs = []
    for paragraph in re.split(r"\n[ \t]*\n", body.strip()):
        items = []
        for marker, lines in _items(paragraph):
            kept = []
            for line in lines:
                alone = _standing_alone(line, resolver)
                kept += [line] if alone is None else []
                warnings += alone or []
            item = _sentences("\n".join(kept), resolver, papers, exempt, warnings, quotes)
            checks += item
            if item:  # a list item stays on its own line, its marker before its first sentence
                items.append(marker + " ".join(c.text for c in item))
        if items:
            paragraphs.append("\n".join(items))
    _score(checks, papers, resolver, scorer, support_threshold, warnings, quotes)
    for check in checks:
        check.text = unmark(check.text)
    cited = list(dict.fromkeys(pid for c in checks for pid in c.citations))
    return Verified(unmark("\n\n".join(paragraphs)), checks, cited, list(dict.fromkeys(warnings)))


def _sentences(
    text: str, resolver: Resolver, papers: Mapping[str, Paper], exempt: Exempt, warnings: Notes, quotes: bool = False
) -> list[SentenceCheck]:
    """The checked sentences of one list item (or of a paragraph that is no list)."""
    pieces: list[tuple[str, list[str], bool]] = []
    for raw in split_sentences(normalize(text, resolver)):
        if quotes and (pid := quoted_paper(raw, papers)):
            pieces.append((raw, [pid], False))  # the paper's own words, as written (it ends "[id].")
            continue
        rewritten, _kept, notes = _rewrite(raw, resolver)
        warnings += notes
        # Removing a reference can expose a sentence boundary ("...question. [paper 1] Keys."): re-split,
        # so that what is shown and what is checked are the same sentences.
        for n, piece in enumerate(split_sentences(rewritten)):
            ids = list(dict.fromkeys(i for i in _BRACKETED.findall(piece) if i in papers))
            if not re.search(r"\w", unmark(strip_citations(piece, resolver))):
                if ids:
                    cites = "".join(f"[{i}]" for i in ids)
                    warnings.append(
                        _removed(f"removed citation {cites} standing alone: no sentence before it on its line")
                    )
                continue
            pieces.append((piece, ids, bool(notes) and n == 0))
    return [
        _check(_as_sentence(piece, papers, last=i == len(pieces) - 1), ids, dropped, exempt, warnings)
        for i, (piece, ids, dropped) in enumerate(pieces)
    ]


def _check(sentence: str, ids: list[str], dropped: bool, exempt: Exempt, warnings: Notes) -> SentenceCheck:
    check = SentenceCheck(sentence, ids)
    if dropped:
        check.flags.append("invalid_citation_removed")
    if not ids and not exempt(unmark(sentence)):
        check.flags.append("uncited")
        warnings.append(AnswerWarning(WarningKind.UNCITED, f"sentence without a citation: {unmark(sentence)[:80]!r}"))
    return check


def _score(
    checks: list[SentenceCheck],
    papers: Mapping[str, Paper],
    resolver: Resolver,
    scorer: SupportScorer,
    support_threshold: float,
    warnings: Notes,
    quotes: bool = False,
) -> None:
    pairs = [(c, pid) for c in checks for pid in c.citations]
    # a quote's references are its own text: only the citation the answerer added goes
    claims = [unmark(quotes and quote_text(c.text, p, papers) or strip_citations(c.text, resolver)) for c, p in pairs]
    for (check, pid), score in zip(pairs, scorer.score_many(claims, [papers[p] for _, p in pairs]), strict=True):
        check.support[pid] = score
    for check in checks:
        if check.support and max(check.support.values()) < support_threshold:
            check.flags.append("weak_support")
            detail = f"weakly supported (score {max(check.support.values()):.2f}): {unmark(check.text)[:80]!r}"
            warnings.append(AnswerWarning(WarningKind.WEAK_SUPPORT, detail))


def references(cited: list[str], sources: Sequence[Paper]) -> list[Reference]:
    papers = {p.paper_id: p for p in sources}
    out = []
    for pid in cited:
        p = papers[pid]
        snippet = p.text[:160] + ("..." if len(p.text) > 160 else "")
        out.append(Reference(pid, p.source, p.position, p.title, snippet, byline(p.metadata)))
    return out
