"""Survey answers: every paper that does what a "which papers ...?" question asks, however many (up to a cap),
with the ones near the cut-off listed apart, grouped by approach when there are many.

Selection reads the match probability of each candidate (match.py): papers at or above `survey_include` are
the answer, best first; those between `survey_possible` and it are "possibly related", shown apart and never
mixed in; the rest are dropped. Both cut-offs were chosen on the dev split of the judged survey set
(docs/retrieval.md#survey-answers). Groups: with more than `_GROUP_FROM` papers, the papers are clustered by
their abstracts' mean sentence vectors (average linkage on cosine distance, scipy; about one group per
_GROUP_SIZE papers, at most _MAX_GROUPS) and each group is named by
the words that set its papers apart from the other listed papers (a class-based TF-IDF)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from rag_assistant.answer.analysis import PaperView
from rag_assistant.text import STOPWORDS, english_stemmer

_GROUP_FROM = 8  # fewer papers read fine as one list
_GROUP_SIZE = 7  # papers per group, roughly
_MAX_GROUPS = 6
_WORD = re.compile(r"[A-Za-z][A-Za-z\-]{2,}")


@dataclass
class Group:
    label: str
    papers: list[str]


@dataclass
class Survey:
    """What a survey answer lists, for `--json`, the terminal, batch and eval alike."""

    papers: list[str]  # the answer, best first
    possible: list[str] = field(default_factory=list)  # near the cut-off, shown apart
    groups: list[Group] = field(default_factory=list)  # empty: one list
    probabilities: dict[str, float] = field(default_factory=dict)
    cap: int = 50
    capped: bool = False  # more papers cleared the cut-off than the cap allows
    considered: int = 0  # candidates judged
    ranking: list[str] = field(default_factory=list)  # every candidate judged, most likely first (evaluation)
    duplicates: dict[str, list[str]] = field(default_factory=dict)  # other ids of the same abstract
    notes: dict[str, str] = field(default_factory=dict)  # possibly related paper -> its key sentence (shown apart)

    def as_dict(self) -> dict:
        return asdict(self)


def select(
    views: Sequence[PaperView],
    probability: np.ndarray,
    include: float,
    possible: float,
    cap: int,
    question_words: Collection[str] = (),
) -> Survey:
    order = sorted(range(len(views)), key=lambda i: (-probability[i], views[i].source.rank))
    chosen = [i for i in order if probability[i] >= include]
    near = [i for i in order if possible <= probability[i] < include]
    survey = Survey(
        [views[i].paper_id for i in chosen[:cap]],
        [views[i].paper_id for i in near[: max(0, cap - len(chosen))][:10]],
        probabilities={views[i].paper_id: round(float(probability[i]), 4) for i in chosen[:cap] + near[:10]},
        cap=cap,
        capped=len(chosen) > cap,
        considered=len(views),
        ranking=[views[i].paper_id for i in order],
        duplicates={v.paper_id: list(v.source.duplicates) for v in views if v.source.duplicates},
    )
    if len(survey.papers) > _GROUP_FROM:
        by_id = {v.paper_id: v for v in views}
        survey.groups = group([by_id[p] for p in survey.papers], set(question_words))
    return survey


def group(views: Sequence[PaperView], question_words: set[str]) -> list[Group]:
    """Papers clustered by what their abstracts say; each group named by its distinctive words."""
    from scipy.cluster.hierarchy import fcluster, linkage

    vectors = np.array([_mean(v.vectors) for v in views])
    tree = linkage(vectors, method="average", metric="cosine")
    # about one group per _GROUP_SIZE papers: a reader scans a few named groups, not a flat list of 30
    labels = fcluster(tree, t=min(_MAX_GROUPS, max(2, round(len(views) / _GROUP_SIZE))), criterion="maxclust")
    if len(set(labels)) < 2:
        return []
    members: dict[int, list[int]] = {}
    for i, label in enumerate(labels):  # views are best first: a group's first member is its best paper
        members.setdefault(int(label), []).append(i)
    ordered = sorted(members.values(), key=lambda idx: (-len(idx), idx[0]))
    names = _names([[views[i] for i in idx] for idx in ordered], question_words)
    return [Group(name, [views[i].paper_id for i in idx]) for name, idx in zip(names, ordered, strict=True)]


def _mean(vectors: np.ndarray) -> np.ndarray:
    mean = vectors.mean(axis=0) if len(vectors) else np.zeros(vectors.shape[1])
    return mean / (np.linalg.norm(mean) or 1.0)


def _names(groups: list[list[PaperView]], question_words: set[str], n: int = 3) -> list[str]:
    """Class-based TF-IDF: a stem scores by its frequency in the group times log(1 + groups / groups using it);
    the group is named by its best stems' most common surface words."""
    stemmer = english_stemmer()
    counts: list[Counter[str]] = []
    surface: dict[str, Counter[str]] = {}
    for members in groups:
        c: Counter[str] = Counter()
        for v in members:
            words = [w for w in _WORD.findall(v.source.paper.text) if w.lower() not in STOPWORDS]
            lower = [w.lower() for w in words]
            for w, st in zip(words, stemmer.stemWords(lower) if stemmer else lower, strict=True):
                if st in question_words:
                    continue
                c[st] += 1
                surface.setdefault(st, Counter())[w] += 1  # as written: "SAEs", not "saes"
        counts.append(c)
    df = Counter(st for c in counts for st in c)
    names = []
    for c in counts:
        total = sum(c.values()) or 1
        scored = sorted(c, key=lambda st: (-(c[st] / total) * math.log(1 + len(groups) / df[st]), st))
        names.append(", ".join(surface[st].most_common(1)[0][0] for st in scored[:n]))
    return names


def count_line(survey: Survey) -> str:
    """The answer's first line. It names the papers near the cut-off too: measured on judged surveys, the clear
    matches are a third of the relevant papers and a reader should know at once that the list may go on."""
    n = len(survey.papers)
    if survey.capped:
        return f"More than {survey.cap} papers match this question; the {n} closest are listed."
    line = f"{n} paper{'s' if n != 1 else ''} match{'es' if n == 1 else ''} this question"
    more = len(survey.possible)
    if more:
        line += f"; {more} more {'is' if more == 1 else 'are'} possibly related (listed apart)"
    return line + "."


def assemble(survey: Survey, lines: Mapping[str, str], extra: Sequence[str] = ()) -> str:
    """The answer text: the count, then the verified lines (paper id -> line), in groups when there are some,
    then `extra` paragraphs (e.g. papers a model left out)."""
    parts = [count_line(survey)]
    if survey.groups:
        for g in survey.groups:
            members = [lines[p] for p in g.papers if p in lines]
            if members:
                parts.append(f"**{g.label}** ({len(members)})")
                parts += members
    else:
        parts += [lines[p] for p in survey.papers if p in lines]
    return "\n\n".join([*parts, *extra])
