"""Resolve every reference in an answer to a retrieved paper or remove and report it (refs.py), flag uncited
sentences and score how well each cited abstract supports its sentence.

Support score (offline, 0..1) of sentence s against abstract A:
    0.5 * max cosine(s, a) over the sentences a of A   (all-MiniLM-L6-v2, the index's model; the vectors of A's
                                                        sentences are the ones stored at ingest, SentenceVectors)
  + 0.5 * share of s's content words that occur in A    (Snowball stems; stop words and citations removed)
A sentence copied from A scores 1.0; a faithful paraphrase ~0.6-0.8; an unrelated claim < 0.35."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rag_assistant.answer.models import Reference, SentenceCheck
from rag_assistant.answer.refs import PREFIX, Resolver
from rag_assistant.corpus.models import Paper
from rag_assistant.text import split_sentences, stems

NOT_FOUND = "The corpus does not cover this question."
_NOT_FOUND_LETTERS = "thecorpusdoesnotcoverthisquestion"
_FILLER = 12  # letters around the phrase still counted as "only the phrase" ("Answer:", "Sorry,")
_REF_LIST = re.compile(
    r"^[ \t]*(?:#+[ \t]*|\*\*)?(?:references|sources|citations|bibliography|works cited)[ \t]*:?[ \t]*(?:\*\*)?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_LINK_DEFINITION = re.compile(r"^[ \t]*\[\^?[^\]\n]{1,80}\]:.*$\n?", re.MULTILINE)
_EMPTY_GROUP = re.compile(r"\(\s*(?:see(?:\s+also)?|cf\.?|e\.g\.,?)?[\s,;]*\)|\[\s*\]")
_BRACKETED = re.compile(r"\[([^\[\]]+)\]")
_LEADING_CITES = re.compile(r"^((?:\[[^\[\]]+\]\s*)+)(.*?)([.!?]?)$", re.DOTALL)


@dataclass
class Verified:
    text: str
    sentences: list[SentenceCheck]
    citations: list[str]
    warnings: list[str]


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
        if before and before[-1] in ".!?" and not before.endswith("et al."):
            stop = re.match(r"[ \t]*[.!?]", text[spans[j].end :])
            out.append(f"{before[:-1]} {text[spans[i].start : spans[j].end]}{before[-1]}")
            pos = spans[j].end + (stop.end() if stop else 0)
        else:
            out.append(text[pos : spans[j].end])
            pos = spans[j].end
        i = j + 1
    return "".join(out) + text[pos:]


def parse_citations(text: str, known: set[str]) -> list[str]:
    """Every piece of every bracketed reference, in order of appearance (duplicates kept), math ignored."""
    resolver = Resolver(known)
    return [
        resolver.resolve(p) or PREFIX.sub("", p).strip()
        for span in resolver.find(text)
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


def _rewrite(sentence: str, resolver: Resolver) -> tuple[str, list[str], list[str]]:
    """Every reference becomes its retrieved ids in brackets, or nothing. Returns text, kept ids, dropped
    pieces (as written, for the warning)."""
    kept: list[str] = []
    dropped: list[str] = []
    replacements: list[tuple[int, int, str]] = []
    for span in resolver.find(sentence):
        good: list[str] = []
        for piece in span.pieces:
            pid = None if span.kind == "inline" else resolver.resolve(piece)
            if pid is None:
                dropped.append(span.display(piece))
            elif pid not in kept and pid not in good:  # each id once per sentence
                good.append(pid)
        kept += good
        gap = " " if span.kind == "footnote" and good else ""  # "keys^1" -> "keys [004:17]"
        replacements.append((span.start, span.end, gap + "".join(f"[{g}]" for g in good)))
    for start, end, repl in reversed(replacements):
        sentence = sentence[:start] + repl + sentence[end:]
    return _tidy(sentence), kept, dropped


def _as_sentence(piece: str) -> str:
    """Shown as one sentence that re-splits as one: citations at the end, a capital, a full stop."""
    lead = _LEADING_CITES.match(piece)
    if lead and lead.group(2).strip():  # "[004:17] Claim." -> "Claim [004:17]."
        piece = f"{lead.group(2).strip()} {lead.group(1).strip()}{lead.group(3)}"
    if piece[:1].islower():
        piece = piece[0].upper() + piece[1:]
    return piece if re.search(r"[.!?][\"')\]]*$", piece) else piece + "."


def _cut_reference_lists(text: str) -> tuple[str, list[str]]:
    """A trailing "References:" block and markdown link definitions ("[1]: ...", hidden when rendered)."""
    warnings = []
    heading = _REF_LIST.search(text)
    if heading and text[heading.end() :].strip():
        text = text[: heading.start()]
        warnings.append("removed a reference list at the end of the answer (citations belong in the sentences)")
    text, n = _LINK_DEFINITION.subn("", text)
    if n:
        warnings.append(f"removed {n} reference definition line(s) ('[label]: ...')")
    return text, warnings


Embed = Callable[[list[str]], np.ndarray]
# papers -> paper id -> the vectors of its sentences, aligned with split_sentences(paper.text): computed once
# at ingest and read from the index (Retriever.sentence_vectors), so answering embeds no abstract sentence
SentenceVectors = Callable[[Sequence[Paper]], Mapping[str, np.ndarray]]


def sentence_vectors(papers: Sequence[Paper], vectors: SentenceVectors | None, embed: Embed) -> list[np.ndarray]:
    """Per paper, the vectors of its sentences (n x dim, in split_sentences order): from `vectors`, or embedded
    now when there is none (a scorer or generator used without an index)."""
    if vectors is not None:
        found = vectors(papers)
        return [found[p.paper_id] for p in papers]
    return [embed(split_sentences(p.text)) for p in papers]


class SupportScorer:
    """Scores claims against abstracts; abstract sentence vectors come from `vectors` (the index's stored
    ones), or are embedded once per paper without it."""

    def __init__(self, embed: Embed, vectors: SentenceVectors | None = None) -> None:
        self.embed = embed
        self.vectors = vectors
        self._cache: dict[str, tuple[np.ndarray, set[str], frozenset[str]]] = {}

    def _load(self, papers: Sequence[Paper]) -> None:
        todo = list({p.paper_id: p for p in papers if p.paper_id not in self._cache}.values())
        for paper, vecs in zip(todo, sentence_vectors(todo, self.vectors, self.embed), strict=True):
            words = set(stems(f"{paper.title or ''} {paper.text}"))
            if not len(vecs):  # no sentence: the whole text, as one
                vecs = self.embed([paper.text])
            self._cache[paper.paper_id] = (vecs, words, frozenset(split_sentences(paper.text)))

    def _paper(self, paper: Paper) -> tuple[np.ndarray, set[str]]:
        self._load([paper])
        return self._cache[paper.paper_id][:2]

    def score_many(self, claims: list[str], papers: list[Paper]) -> list[float]:
        """Support of claims[i] by papers[i], the claims batched in one embedding call. A claim that is one of
        its paper's sentences word for word (a quote: every extractive answer) has cosine 1 without embedding."""
        if not claims:
            return []
        self._load(papers)
        quoted = [claim in self._cache[paper.paper_id][2] for claim, paper in zip(claims, papers, strict=True)]
        fresh = iter(self.embed([c for c, q in zip(claims, quoted, strict=True) if not q]))
        out = []
        for claim, is_quote, paper in zip(claims, quoted, papers, strict=True):
            sent_vecs, words = self._paper(paper)
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
    exempt: Callable[[str], bool] = lambda s: False,
    labels: Mapping[str, str] | None = None,
) -> Verified:
    """Check an answer against the papers it may cite. Every reference (any shape, see refs.py) becomes the
    retrieved paper id it names -- `labels` maps the prompt's short source labels -- or is removed and
    reported. `known_ids` are corpus ids that were not retrieved, recognised as citations (and removed)."""
    papers = {p.paper_id: p for p in sources}
    resolver = Resolver(papers, labels, known_ids or ())
    body, warnings = _cut_reference_lists(text.strip())
    checks: list[SentenceCheck] = []
    paragraphs = []
    for paragraph in re.split(r"\n[ \t]*\n", normalize(body.strip(), resolver)):
        rendered = []
        for raw in split_sentences(paragraph):
            rewritten, _kept, dropped = _rewrite(raw, resolver)
            warnings += [f"removed citation {d}: not among the retrieved papers" for d in dropped]
            # Removing a reference can expose a sentence boundary ("...question. [paper 1] Keys."): re-split,
            # so that what is shown and what is checked are the same sentences.
            for n, piece in enumerate(split_sentences(rewritten)):
                ids = list(dict.fromkeys(i for i in _BRACKETED.findall(piece) if i in papers))
                if not re.search(r"\w", strip_citations(piece, resolver)):
                    if ids:
                        cites = "".join(f"[{i}]" for i in ids)
                        warnings.append(f"removed citation {cites} standing alone: no sentence before it on its line")
                    continue
                check = _check(_as_sentence(piece), ids, bool(dropped) and n == 0, exempt, warnings)
                checks.append(check)
                rendered.append(check.text)
        if rendered:
            paragraphs.append(" ".join(rendered))
    _score(checks, papers, resolver, scorer, support_threshold, warnings)
    cited = list(dict.fromkeys(pid for c in checks for pid in c.citations))
    return Verified("\n\n".join(paragraphs), checks, cited, list(dict.fromkeys(warnings)))


def _check(
    sentence: str, ids: list[str], dropped: bool, exempt: Callable[[str], bool], warnings: list[str]
) -> SentenceCheck:
    check = SentenceCheck(sentence, ids)
    if dropped:
        check.flags.append("invalid_citation_removed")
    if not ids and not exempt(sentence):
        check.flags.append("uncited")
        warnings.append(f"sentence without a citation: {sentence[:80]!r}")
    return check


def _score(
    checks: list[SentenceCheck],
    papers: Mapping[str, Paper],
    resolver: Resolver,
    scorer: SupportScorer,
    support_threshold: float,
    warnings: list[str],
) -> None:
    pairs = [(c, pid) for c in checks for pid in c.citations]
    claims = [strip_citations(c.text, resolver) for c, _ in pairs]
    for (check, pid), score in zip(pairs, scorer.score_many(claims, [papers[p] for _, p in pairs]), strict=True):
        check.support[pid] = score
    for check in checks:
        if check.support and max(check.support.values()) < support_threshold:
            check.flags.append("weak_support")
            warnings.append(f"weakly supported (score {max(check.support.values()):.2f}): {check.text[:80]!r}")


def references(cited: list[str], sources: Sequence[Paper]) -> list[Reference]:
    papers = {p.paper_id: p for p in sources}
    out = []
    for pid in cited:
        p = papers[pid]
        snippet = p.text[:160] + ("..." if len(p.text) > 160 else "")
        out.append(Reference(pid, p.source, p.position, p.title, snippet))
    return out
