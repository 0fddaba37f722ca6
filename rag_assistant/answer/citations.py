"""Parse inline [paper_id] citations, drop those that point outside the retrieved sources, flag uncited
sentences and score how well each cited abstract supports its sentence.

Support score (offline, 0..1) of sentence s against abstract A:
    0.5 * max cosine(s, a) over the sentences a of A   (all-MiniLM-L6-v2, the index's model)
  + 0.5 * share of s's content words that occur in A    (Snowball stems; stop words and citations removed)
A sentence copied from A scores 1.0; a faithful paraphrase ~0.6-0.8; an unrelated claim < 0.35."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rag_assistant.answer.models import Reference, SentenceCheck
from rag_assistant.corpus.models import Paper
from rag_assistant.text import split_sentences, stems

BRACKET = re.compile(r"\[([^\[\]\n]{1,200})\]")
MATH = re.compile(r"\$[^$]*\$")
_CITE_AFTER_STOP = re.compile(r"([.!?])((?:\s*\[[^\[\]\n]{1,200}\])+)")
_PREFIX = re.compile(r"^(?:paper|source|id|doc|ref)\s*[:#]?\s*", re.IGNORECASE)
_ID_LIKE = re.compile(r"^(?:[\w.\-/]+:\d+|[0-9a-f]{8,}|\d{1,3})$", re.IGNORECASE)


@dataclass
class Verified:
    text: str
    sentences: list[SentenceCheck]
    citations: list[str]
    warnings: list[str]


def _pieces(content: str) -> list[str]:
    return [_PREFIX.sub("", p.strip()) for p in re.split(r"[,;]|\]\s*\[", content) if p.strip()]


def is_citation(content: str, known: set[str]) -> bool:
    """A bracket is a citation when its pieces are known ids or look like ids; [0, 1] in math is not."""
    pieces = _pieces(content)
    return bool(pieces) and all(p in known or _ID_LIKE.match(p) for p in pieces)


def normalize(text: str) -> str:
    """Move citations written after the full stop ("... memory. [004:17]") before it."""
    return _CITE_AFTER_STOP.sub(lambda m: f"{m.group(2)}{m.group(1)}", text)


def parse_citations(text: str, known: set[str]) -> list[str]:
    """Every cited id in order of appearance (duplicates kept), math spans ignored."""
    masked = MATH.sub(lambda m: " " * len(m.group(0)), text)
    out: list[str] = []
    for m in BRACKET.finditer(masked):
        if is_citation(m.group(1), known):
            out.extend(_pieces(m.group(1)))
    return out


def strip_citations(text: str, known: set[str]) -> str:
    masked = MATH.sub(lambda m: " " * len(m.group(0)), text)
    spans = [m.span() for m in BRACKET.finditer(masked) if is_citation(m.group(1), known)]
    for start, end in reversed(spans):
        text = text[:start] + text[end:]
    return re.sub(r"\s+([.,;:!?])", r"\1", re.sub(r"\s{2,}", " ", text)).strip()


def _rewrite(sentence: str, known: set[str], valid: set[str]) -> tuple[str, list[str], list[str]]:
    """Keep valid ids inside each citation bracket, drop the rest. Returns text, kept ids, dropped ids."""
    kept: list[str] = []
    dropped: list[str] = []
    masked = MATH.sub(lambda m: " " * len(m.group(0)), sentence)
    pieces: list[tuple[int, int, str]] = []
    for m in BRACKET.finditer(masked):
        if not is_citation(m.group(1), known):
            continue
        good = [p for p in _pieces(m.group(1)) if p in valid and p not in kept]  # once per sentence
        dropped += [p for p in _pieces(m.group(1)) if p not in valid]
        kept += good
        pieces.append((m.start(), m.end(), "".join(f"[{g}]" for g in dict.fromkeys(good))))
    for start, end, repl in reversed(pieces):
        sentence = sentence[:start] + repl + sentence[end:]
    sentence = re.sub(r"\s+([.,;:!?])", r"\1", re.sub(r"\s{2,}", " ", sentence)).strip()
    return sentence, list(dict.fromkeys(kept)), dropped


class SupportScorer:
    """Scores claims against abstracts; abstract sentence vectors are computed once per paper."""

    def __init__(self, embed: Callable[[list[str]], np.ndarray]) -> None:
        self.embed = embed
        self._cache: dict[str, tuple[np.ndarray, set[str]]] = {}

    def _paper(self, paper: Paper) -> tuple[np.ndarray, set[str]]:
        if paper.paper_id not in self._cache:
            sentences = split_sentences(paper.text) or [paper.text]
            words = set(stems(f"{paper.title or ''} {paper.text}"))
            self._cache[paper.paper_id] = (self.embed(sentences), words)
        return self._cache[paper.paper_id]

    def score_many(self, claims: list[str], papers: list[Paper]) -> list[float]:
        """Support of claims[i] by papers[i], batched in one embedding call."""
        if not claims:
            return []
        claim_vecs = self.embed(claims)
        out = []
        for claim, vec, paper in zip(claims, claim_vecs, papers, strict=True):
            sent_vecs, words = self._paper(paper)
            cosine = float(np.max(sent_vecs @ vec)) if len(sent_vecs) else 0.0
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
    exempt: Callable[[str], bool] = lambda s: False,
) -> Verified:
    """Check an answer against the papers it may cite. `known_ids` adds ids that exist in the corpus but
    were not retrieved, so that they too are recognised as citations (and removed)."""
    papers = {p.paper_id: p for p in sources}
    valid = set(papers)
    known = valid | (known_ids or set())
    warnings: list[str] = []
    checks: list[SentenceCheck] = []
    paragraphs = []
    for paragraph in re.split(r"\n\s*\n", normalize(text.strip())):
        rendered = []
        for raw in split_sentences(paragraph):
            sentence, kept, dropped = _rewrite(raw, known, valid)
            if not strip_citations(sentence, known):
                continue  # a stray citation with no words left
            check = SentenceCheck(sentence, kept)
            for pid in dict.fromkeys(dropped):
                check.flags.append("invalid_citation_removed")
                warnings.append(f"removed citation [{pid}]: not among the retrieved papers")
            if not kept and not exempt(sentence):
                check.flags.append("uncited")
                warnings.append(f"sentence without a citation: {sentence[:80]!r}")
            checks.append(check)
            rendered.append(sentence)
        if rendered:
            paragraphs.append(" ".join(rendered))

    pairs = [(c, pid) for c in checks for pid in c.citations]
    scores = scorer.score_many([strip_citations(c.text, known) for c, _ in pairs], [papers[p] for _, p in pairs])
    for (check, pid), score in zip(pairs, scores, strict=True):
        check.support[pid] = score
    for check in checks:
        if check.support and max(check.support.values()) < support_threshold:
            check.flags.append("weak_support")
            warnings.append(f"weakly supported (score {max(check.support.values()):.2f}): {check.text[:80]!r}")
    cited = list(dict.fromkeys(pid for c in checks for pid in c.citations))
    return Verified("\n\n".join(paragraphs), checks, cited, list(dict.fromkeys(warnings)))


def references(cited: list[str], sources: Sequence[Paper]) -> list[Reference]:
    papers = {p.paper_id: p for p in sources}
    out = []
    for pid in cited:
        p = papers[pid]
        snippet = p.text[:160] + ("..." if len(p.text) > 160 else "")
        out.append(Reference(pid, p.source, p.position, p.title, snippet))
    return out
