"""One candidate question, written and checked: the record a slot leaves in the journal (see run.py).

Each kind writes its question from a seed paper and goes through its filters in order, cheapest first; the
first one that fails names the record's `removed_by`, with `why`:

  malformed             the writer's reply holds no JSON object with the fields asked for
  ill-formed            not one readable question of its kind (checks.form_problem)
  copied                single-paper kinds: more than max_overlap of its word trigrams are in the abstract
  not-answered-by-gold  single-paper kinds: the judge does not answer YES for the seed abstract with a quote
                        found in it; surveys: fewer than two pooled papers meet the criterion
  answered-by-other     single-paper kinds: one of the OTHERS best other retrieved papers answers it (YES) too
  too-broad             surveys: more than BROAD of the pooled papers meet the criterion (the topic reaches
                        past what was judged, so the gold list would be incomplete)
  off-topic             unanswerable: its seed paper is not among the TOP papers retrieved for it
  answerable            unanswerable: the judge answers YES for one of the TOP papers retrieved for it

An unreadable verdict counts against the question. Near-duplicates are removed later, across slots."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rag_assistant.corpus.models import Paper
from rag_assistant.evaluate.generate.asker import Asker, Verdict, paper_text
from rag_assistant.evaluate.generate.checks import MAX_OVERLAP, form_problem, overlap, parse_reply
from rag_assistant.evaluate.generate.sampling import SINGLE, Slot
from rag_assistant.retrieve import Retriever, Source

OTHERS = 3  # other papers judged for a single-paper question
CLUSTER = 10  # papers a survey question is written from (the seed paper's neighbours)
POOL = 10  # the survey question's own top papers, judged beside its cluster
BROAD = 0.7
TOP = 5  # papers an unanswerable question is checked against
DEPTH = 10  # papers retrieved for a question (seed_rank: where its seed paper is among them)
REPLY_KEPT = 2000  # characters of the writer's raw reply kept in the record


@dataclass
class Context:
    """What every slot shares: the model calls, the index (searched under one lock: the embedder and keyword
    index are not thread-safe) and the corpus."""

    asker: Asker
    retriever: Retriever
    papers: dict[str, Paper]
    max_overlap: float = MAX_OVERLAP
    lock: threading.Lock = field(default_factory=threading.Lock)

    def search(self, query: str, k: int) -> list[Source]:
        with self.lock:
            return self.retriever.search(query, k)


def _is(source: Source, paper_id: str) -> bool:
    return source.paper_id == paper_id or paper_id in source.duplicates


def _removed(record: dict[str, Any], name: str, why: str) -> dict[str, Any]:
    return {**record, "removed_by": name, "why": why}


def _parsed(record: dict[str, Any], reply: str, fields: tuple[str, ...]) -> dict[str, str] | None:
    record["reply"] = reply[:REPLY_KEPT]
    got = parse_reply(reply, fields)
    if got is not None:
        record["question"] = got["question"]
    return got


def _seed_rank(ranked: list[Source], paper_id: str) -> int | None:
    return next((s.rank for s in ranked if _is(s, paper_id)), None)


def single(slot: Slot, ctx: Context, record: dict[str, Any]) -> dict[str, Any]:
    """known-item, method, result: one gold paper, the seed."""
    paper = ctx.papers[slot.seed_paper]
    got = _parsed(
        record, ctx.asker.write(slot.kind, title=paper.title or "", abstract=paper.text), ("question", "answer")
    )
    if got is None:
        return _removed(record, "malformed", "no JSON object with a question and an answer")
    question = got["question"]
    record.update(gold_papers=[paper.paper_id], gold_answer=got["answer"], overlap=overlap(question, paper.text))
    if problem := form_problem(question, slot.kind):
        return _removed(record, "ill-formed", problem)
    if record["overlap"] > ctx.max_overlap:
        share = f"{record['overlap']:.2f} of its word trigrams are in the abstract (at most {ctx.max_overlap:g})"
        return _removed(record, "copied", share)
    gold = ctx.asker.answers(question, paper, "gold")
    record["checks"].append(gold.as_dict())
    if gold.verdict != "YES" or not gold.verified:
        seen = "no readable verdict" if gold.verdict is None else gold.verdict
        quote = "" if gold.verdict != "YES" else " without a quote found in the abstract"
        return _removed(record, "not-answered-by-gold", f"the judge said {seen}{quote}")
    ranked = ctx.search(question, DEPTH)
    record["seed_rank"] = _seed_rank(ranked, paper.paper_id)
    for source in [s for s in ranked if not _is(s, paper.paper_id)][:OTHERS]:
        other = ctx.asker.answers(question, source.paper, "other")
        record["checks"].append(other.as_dict())
        if other.verdict in ("YES", None):
            said = "answers it as well" if other.verdict else "got no readable verdict"
            return _removed(record, "answered-by-other", f"{source.paper_id} {said}")
    return record


def _listing(papers: list[Paper]) -> str:
    return "\n\n".join(f"[{n}] {paper_text(p)}" for n, p in enumerate(papers, start=1))


def survey(slot: Slot, ctx: Context, record: dict[str, Any]) -> dict[str, Any]:
    """A "which papers ...?" question from the seed paper's cluster; gold = the pooled papers meeting the
    criterion the writer wrote, borderline apart."""
    seed = ctx.papers[slot.seed_paper]
    cluster = [s.paper for s in ctx.search(seed.text, CLUSTER)]
    record["cluster"] = [p.paper_id for p in cluster]
    got = _parsed(record, ctx.asker.write("survey", papers=_listing(cluster)), ("question", "criterion"))
    if got is None:
        return _removed(record, "malformed", "no JSON object with a question and a criterion")
    question, criterion = got["question"], got["criterion"]
    record.update(criterion=criterion, overlap=overlap(question, " ".join(p.text for p in cluster)))
    if problem := form_problem(question, "survey"):
        return _removed(record, "ill-formed", problem)
    pool = {p.paper_id: p for p in cluster}
    for source in ctx.search(question, POOL):
        if not any(_is(source, pid) for pid in pool):
            pool[source.paper_id] = source.paper
    verdicts = [ctx.asker.meets(criterion, paper, "pool") for paper in pool.values()]
    record["checks"] += [v.as_dict() for v in verdicts]
    if unread := [v.paper for v in verdicts if v.verdict is None]:
        return _removed(record, "not-answered-by-gold", f"no readable verdict on {', '.join(unread)}")
    relevant = [v.paper for v in verdicts if v.verdict == "RELEVANT"]
    record.update(gold_papers=relevant, borderline_papers=[v.paper for v in verdicts if v.verdict == "BORDERLINE"])
    if len(relevant) < 2:
        return _removed(record, "not-answered-by-gold", f"{len(relevant)} of {len(pool)} pooled papers meet it")
    if len(relevant) > BROAD * len(pool):
        return _removed(record, "too-broad", f"{len(relevant)} of {len(pool)} pooled papers meet it")
    return record


def unanswerable(slot: Slot, ctx: Context, record: dict[str, Any]) -> dict[str, Any]:
    """The seed paper's topic plus a requirement no paper meets; gold = []."""
    seed = ctx.papers[slot.seed_paper]
    reply = ctx.asker.write("unanswerable", title=seed.title or "", abstract=seed.text)
    got = _parsed(record, reply, ("question", "topic", "requirement"))
    if got is None:
        return _removed(record, "malformed", "no JSON object with a question, a topic and a requirement")
    question = got["question"]
    record.update(
        gold_papers=[],
        overlap=overlap(question, seed.text),
        gold_answer=f"No paper meets the requirement ({got['requirement']}); the topic ({got['topic']}) is covered.",
    )
    if problem := form_problem(question, "unanswerable"):
        return _removed(record, "ill-formed", problem)
    ranked = ctx.search(question, DEPTH)
    record["seed_rank"] = _seed_rank(ranked, seed.paper_id)
    if record["seed_rank"] is None or record["seed_rank"] > TOP:
        return _removed(record, "off-topic", f"its seed paper is not among the {TOP} papers retrieved for it")
    for source in ranked[:TOP]:
        verdict: Verdict = ctx.asker.answers(question, source.paper, "top")
        record["checks"].append(verdict.as_dict())
        if verdict.verdict in ("YES", None):
            said = "answers it" if verdict.verdict else "got no readable verdict"
            return _removed(record, "answerable", f"{source.paper_id} {said}")
    return record


WRITERS: dict[str, Callable[[Slot, Context, dict[str, Any]], dict[str, Any]]] = {
    **dict.fromkeys(SINGLE, single),
    "survey": survey,
    "unanswerable": unanswerable,
}


def candidate(slot: Slot, ctx: Context) -> dict[str, Any]:
    """The slot's journal record: its question and verdicts, `removed_by` None when it passed every filter.
    Model failures (RagAssistantError) propagate: the caller records the slot as failed."""
    record: dict[str, Any] = {
        "slot": slot.id,
        "kind": slot.kind,
        "index": slot.index,
        "seed_paper": slot.seed_paper,
        "status": "ok",
        "question": None,
        "removed_by": None,
        "why": None,
        "checks": [],
    }
    return WRITERS[slot.kind](slot, ctx, record)
