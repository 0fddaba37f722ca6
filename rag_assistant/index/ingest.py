"""The write side of the index. Ingest: papers -> chunks -> embeddings (and sentence vectors) -> store, then the
keyword index; also from files (`ingest_paths`). Idempotent and crash-safe: chunk ids are deterministic and each
chunk records its paper's hash and chunk count, so a paper whose chunks are missing or mixed (a killed run) is
redone, and upserts never duplicate. Papers are written whole, a step at a time, each with its sentence vectors
first, so a rerun after a kill does only what was not stored. A paper stored in part (one larger than a step)
stays hidden from search until then: each run registers itself as pending before writing (index/pending.py).
A paper's listing (index/store.py) follows its last chunk, so an unchanged re-ingest finds the listings, not
every chunk's metadata."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from rag_assistant.config import Settings
from rag_assistant.corpus.loader import CorpusLoad
from rag_assistant.corpus.models import Paper
from rag_assistant.corpus.parsers import location
from rag_assistant.errors import CorpusError
from rag_assistant.index import sparse
from rag_assistant.index.chroma_open import compact, persist_vectors
from rag_assistant.index.chunking import Chunk, chunk_paper, token_counter
from rag_assistant.index.embedding import get_embedder, get_tokenizer
from rag_assistant.index.ingest_report import FilesIngest, IngestReport
from rag_assistant.index.keyword import KeywordDoc, KeywordIndex
from rag_assistant.index.keyword_cache import sync_client_cache
from rag_assistant.index.keyword_fields import keyword_doc, store_docs
from rag_assistant.index.pending import delete_by_paper, open_log, settle
from rag_assistant.index.runlog import RunLog
from rag_assistant.index.sentences import SentenceIngest, SentencePass
from rag_assistant.index.state import check_model, index_chunking, keyword_dir, model_signature, store_revision
from rag_assistant.index.steps import write_steps
from rag_assistant.index.store import RUN_KEY, PaperState, StoredChunk, VectorStore, open_store, paper_to_metadata
from rag_assistant.text import plural

EMBED_BATCH = 256  # chunks embedded and written per step (whole papers): bounds memory and the work a kill loses

Progress = Callable[[int, int], None]  # (chunks embedded and stored, chunks to embed)


@dataclass
class _Plan:
    """What an ingest must change: papers to (re)write, the stored state of the given papers, and the chunks of
    stored papers that their files no longer hold."""

    todo: list[Paper]
    states: dict[str, PaperState]
    stale: dict[str, tuple[str, ...]]
    unlisted: list[tuple[Paper, int]]  # unchanged papers not listed (an index from before listings, a kill)
    upgraded: set[str] = field(default_factory=set)  # unchanged papers rewritten in the current layout


def sync_keyword_index(store: VectorStore, settings: Settings, force: bool = False) -> KeywordIndex:
    """Rebuild the keyword index on disk when the store changed since it was built (also after a killed run)."""
    index = KeywordIndex(keyword_dir(settings))
    revision = store_revision(store.get_info())
    if force or index.revision != revision:
        index.build(store_docs(store), revision)
    return index


def ingest_paths(
    settings: Settings,
    paths: Sequence[Path] | None = None,
    skip_bad: bool = False,
    progress: Progress | None = None,
    on_loaded: Callable[[CorpusLoad], None] | None = None,
) -> FilesIngest:
    """Load files or folders (None: the bundled corpus) and ingest their papers; `on_loaded` sees what the
    loader skipped and warned about before the (long) ingest starts."""
    from rag_assistant.corpus import bundled_corpus_path, load_corpus

    files = list(paths) if paths else [bundled_corpus_path()]
    loaded = load_corpus(files, skip_bad=skip_bad, max_abstract_chars=settings.max_abstract_chars)
    if on_loaded:
        on_loaded(loaded)
    return FilesIngest(loaded, ingest_papers(loaded.papers, settings, progress=progress), settings.data_dir)


def ingest_papers(
    papers: list[Paper],
    settings: Settings,
    store: VectorStore | None = None,
    progress: Progress | None = None,
) -> IngestReport:
    """Bring the index in line with `papers`: write new and changed ones, drop the papers their files no longer
    hold, skip the unchanged; `progress` is called after each written step."""
    started = time.perf_counter()
    owned = store is None
    store = store or open_store(settings)
    info = check_model(store, settings)
    report = IngestReport(papers=len(papers))
    chunking, warning = index_chunking(info, store, settings)
    if warning:
        report.warnings.append(warning)
    plan = _plan(papers, store, report)
    store.list_papers(plan.unlisted)
    s = settings

    def embedder() -> Any:  # noqa: ANN401 - a BaseEmbedder, or a test's stand-in
        return get_embedder(s.embedding_model, s.embedding_backend, s.embed_batch_size, s.remote_embedding)

    sentences = SentenceIngest(settings, chunking, embedder, _lazy_counter(s.embedding_model), store)
    try:
        if plan.todo or plan.stale:
            _write_changes(plan, store, info, settings, chunking, progress, report, sentences)
        else:
            _finish_unchanged(store, info, settings, report)
        _finish_sentences(papers, plan, sentences, progress, report)
    finally:
        sentences.close()
    if owned:  # its client let go (chromadb keeps ~20 descriptors per path open until the last client closes)
        store.close()
        if not settings.chroma_url:
            persist_vectors(settings.chroma_dir, settings.collection)
    if report.upgraded and not settings.chroma_url:  # the old documents' space, given back
        compact(settings.chroma_dir)
    report.seconds = time.perf_counter() - started
    return report


def _lazy_counter(model: str | None) -> Callable[[str], int]:
    """Counts tokens with the model's tokenizer, loaded on first use: an unchanged re-ingest loads none."""
    counters: list[Callable[[str], int]] = []

    def count(text: str) -> int:
        if not counters:
            counters.append(token_counter(get_tokenizer(model)))
        return counters[0](text)

    return count


def _plan(papers: list[Paper], store: VectorStore, report: IngestReport) -> _Plan:
    """Compare the papers with what the store holds; counts new, changed and unchanged papers in `report`."""
    by_id = {p.paper_id: p for p in papers}
    # One query per source file finds almost every paper on a re-ingest; only the rest is looked up by id.
    from_sources = store.source_states(sorted({p.source for p in papers}), {p.paper_id: p.content_hash for p in papers})
    states = {pid: st for pid, st in from_sources.items() if pid in by_id}
    missing = [pid for pid in by_id if pid not in states]
    if missing:
        states.update(store.paper_states(missing))
    _refuse_clashes(papers, states)
    todo: list[Paper] = []
    unlisted: list[tuple[Paper, int]] = []
    upgraded: set[str] = set()
    for paper in papers:
        state = states.get(paper.paper_id)
        if state is None:
            report.new += 1
            todo.append(paper)
        elif state.content_hash != paper.content_hash:  # "" too: chunks of two versions (a killed rewrite)
            report.changed += 1
            todo.append(paper)
        elif not state.complete:
            report.resumed += 1
            todo.append(paper)
        elif state.legacy:  # chunks of an older layout: rewritten, reusing their vectors and sentence vectors
            report.upgraded += 1
            upgraded.add(paper.paper_id)
            todo.append(paper)
        else:
            report.unchanged += 1
            if not state.listed:
                unlisted.append((paper, len(state.chunk_ids)))
    stale = {pid: st.chunk_ids for pid, st in from_sources.items() if pid not in by_id}
    return _Plan(todo, states, stale, unlisted, upgraded)


def _refuse_clashes(papers: list[Paper], states: dict[str, PaperState]) -> None:
    """A paper id already stored from another file is an error, never a silent replacement."""
    conflicts = [
        f"{location(p.source, p.line, p.position)}: id '{p.paper_id}' is already in the index from "
        f"{states[p.paper_id].source}"
        for p in papers
        if p.paper_id in states and states[p.paper_id].source not in ("", p.source)
    ]
    if conflicts:
        raise CorpusError(
            conflicts[0] if len(conflicts) == 1 else f"{len(conflicts)} paper ids clash with ingested papers",
            "rename the file (ids of text files start with its name) or give records their own ids",
            details=conflicts if len(conflicts) > 1 else None,
        )


def _finish_sentences(
    papers: list[Paper], plan: _Plan, sentences: SentenceIngest, progress: Progress | None, report: IngestReport
) -> None:
    """Drop the sentence vectors of removed and changed papers, and compute those still missing: unchanged papers
    of an index from before sentence vectors, or ingested by another client of a shared Chroma server (a
    backfill, which encodes their chunks once more without storing them again)."""
    changed = [p.paper_id for p in plan.todo if p.paper_id in plan.states and p.paper_id not in plan.upgraded]
    missing = sentences.missing(papers)  # their rows of an older digest (a changed splitter) go too
    sentences.delete([*plan.stale, *changed, *(p.paper_id for p in missing)], papers)
    sentences.backfill(missing, progress)
    report.sentence_papers, report.sentence_papers_kept = sentences.written, sentences.carried


def _finish_unchanged(store: VectorStore, info: dict[str, Any], settings: Settings, report: IngestReport) -> None:
    """Nothing to write: only bring the keyword index and the pending runs up to date after a killed run."""
    revision = store_revision(info)
    runs, info = open_log(store, info)
    log = runs if settings.chroma_url else None  # a shared server's clients follow its run log
    report.keyword_rebuilt = KeywordIndex.stored_revision(keyword_dir(settings)) != revision  # e.g. a killed run
    if report.keyword_rebuilt and log is None:
        KeywordIndex(keyword_dir(settings)).build(store_docs(store), revision)
    if runs.pending():  # a killed run had written everything, or left papers of other files: settled by a run
        _settle(store, runs, uuid.uuid4().hex, 0, report)  # of its own that writes nothing
    if report.keyword_rebuilt and log:  # only what other clients' or killed runs changed is read
        sync_client_cache(store, settings, log)


def _write_changes(
    plan: _Plan,
    store: VectorStore,
    info: dict[str, Any],
    settings: Settings,
    chunking: tuple[int, int],
    progress: Progress | None,
    report: IngestReport,
    sentences: SentenceIngest,
) -> None:
    """Write the new, resumed and changed papers with their sentence vectors, delete obsolete chunks, update the
    keyword index, settle the run."""
    # Mark the store as changing before writing, so a kill leaves a revision the keyword index lacks.
    # Registered as pending too: whatever this run writes stays hidden from search until it has settled.
    # 16 hex digits: the run's id is stored with every chunk it writes (64 random bits never repeat in practice)
    before, revision = store_revision(info), uuid.uuid4().hex[:16]
    runs, info = open_log(store, info)
    runs.start(revision)  # before the revision moves: a reader that sees the new revision sees the run pending
    info = {**info, "embedding_model": model_signature(settings), "chunking": "/".join(map(str, chunking))}
    info.update(sparse.recorded(store))  # where keyword search runs: readers read it, never probe (index/sparse.py)
    store.set_info({**info, "revision": revision})
    log = runs if settings.chroma_url else None  # a shared server's clients follow its run log
    store.unlist_papers([*(p.paper_id for p in plan.todo if p.paper_id in plan.states), *plan.stale])

    count = token_counter(get_tokenizer(settings.embedding_model))
    papers = [(paper, chunk_paper(paper, count, *chunking)) for paper in plan.todo]
    chunks = [c for _, pieces in papers for c in pieces]
    known = store.embeddings_for([c.text for c in chunks])
    chunk_pass = sentences.chunk_pass(sentences.missing(plan.todo))
    new_ids = {c.chunk_id for c in chunks}
    stored = {p.paper_id: plan.states[p.paper_id].chunk_ids for p in plan.todo if p.paper_id in plan.states}
    surplus = {pid: [c for c in cids if c not in new_ids] for pid, cids in stored.items()}
    shedding = {pid for pid, cids in surplus.items() if cids}  # listed only once their surplus chunks are gone
    steps = write_steps(papers, EMBED_BATCH)
    marks = (lambda step: runs.step(revision, step), shedding)  # each step recorded before it is written
    report.chunks_embedded = _embed_and_store(steps, chunk_pass, store, progress, known, revision, marks)
    report.chunks_added = len(chunks)

    obsolete = [cid for cids in [*surplus.values(), *plan.stale.values()] for cid in cids]
    if obsolete:
        runs.deleting(revision, obsolete, len(steps) + 1)
    delete_by_paper(store, obsolete)
    store.list_papers([(p, len(pieces)) for p, pieces in papers if p.paper_id in shedding])
    report.chunks_deleted = len(obsolete)
    report.removed = len(plan.stale)

    report.keyword_rebuilt = True
    if log:  # settled first: the keyword cache then applies this run as done, like any client's
        _settle(store, runs, revision, len(steps) + 1, report)
        # A new revision: a client whose cache applied this run as settled by another ingest between two of its
        # steps (and labelled itself current) syncs again. Never an old value, so a concurrent write loses nothing.
        store.set_info({**store.get_info(), "revision": uuid.uuid4().hex})
        sync_client_cache(store, settings, log)
    else:  # settled last (a kill leaves the run pending)
        docs = [keyword_doc(c.chunk_id, c.text, paper) for paper, pieces in papers for c in pieces]
        settled = _update_keyword(store, settings, docs, obsolete, before, revision)
        if settled != revision:  # the keyword index was rebuilt under a revision of its own
            store.set_info({**store.get_info(), "revision": settled})
        _settle(store, runs, revision, len(steps) + 1, report)


def _update_keyword(
    store: VectorStore, settings: Settings, added: list[KeywordDoc], obsolete: list[str], before: str, run: str
) -> str:
    """Bring the keyword index up to date; returns the revision the store settles at. Another client that started
    writing since this run did (the store's revision is not its own) is not in the update: rebuilt from the store
    under a new revision instead (that client's readers rebuild, or its ingest does)."""
    keyword = KeywordIndex(keyword_dir(settings))
    if store_revision(store.get_info()) != run:
        revision = uuid.uuid4().hex
        keyword.build(store_docs(store), revision)
        return revision
    # updated when in step with the store before this run, unless too much of it would be removed chunks
    if not (keyword.can_update(before) and keyword.update(added, obsolete, run)):
        keyword.build(store_docs(store), run)
    return run


def _settle(store: VectorStore, runs: RunLog, finished: str, step: int, report: IngestReport) -> None:
    """Mark run `finished` done, settling the other pending runs it finds complete (the runs other clients' caches
    then apply as final)."""
    settles, left = settle(store, runs, finished)
    runs.finish(finished, step, settles)
    if left:
        report.warnings.append(
            f"{plural(left, 'paper')} of an interrupted ingest {'is' if left == 1 else 'are'} still incomplete and "
            "hidden from search: ingest the files they came from again"
        )


def _embed_and_store(
    steps: list[list[tuple[Paper, Chunk, int]]],
    chunk_pass: SentencePass,
    store: VectorStore,
    progress: Progress | None,
    known: dict[str, list[float]],
    run: str,
    marks: tuple[Callable[[int], None], Collection[str]],
) -> int:
    """Embed and write step by step, each step's chunks stored while the next step is embedded (the model keeps
    both cores busy while Chroma writes on one background thread); returns how many chunk texts got a new
    vector. Texts in `known` (already stored), and repeats within a step, are embedded once.

    Before a step's chunks are written, the sentence vectors of the papers it completes are: a stored paper has
    them, and a kill loses at most the step in flight. Only a paper larger than a step can be stored in part:
    its chunks carry the pending `run`, so it stays hidden until an ingest completes it. Each paper completed
    is listed (index/store.py) after its last chunk is written, but those in `marks[1]` (the caller lists
    them once their surplus chunks are deleted). `marks[0]` records each step's number in the run log before
    the step is written (index/runlog.py)."""
    from concurrent.futures import Future, ThreadPoolExecutor

    done = embedded = 0
    total, dimension = sum(map(len, steps)), store.dimension()
    pending: tuple[Future[None], int] | None = None

    def wait_for_write() -> None:
        nonlocal done, pending
        if pending is not None:
            pending[0].result()  # one write in flight: memory stays bounded and errors surface here
            done, pending = done + pending[1], None
            if progress:
                progress(done, total)

    mark, unlisted = marks
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="chroma-writer") as writer:
        for number, step in enumerate(steps, 1):
            fresh, rows, dimension = _encode_step(step, chunk_pass, known, dimension)
            embedded += sum(t not in known for t in fresh)
            chunk_pass.write(rows)
            vectors = [known[c.text] if c.text in known else fresh[c.text] for _, c, _ in step]
            stored = [
                StoredChunk(c.chunk_id, p.paper_id, c.text, {**paper_to_metadata(p, c.index, n), RUN_KEY: run})
                for p, c, n in step
            ]
            whole = [(p, n) for p, c, n in step if c.index == n - 1 and p.paper_id not in unlisted]  # completed
            wait_for_write()
            pending = writer.submit(_store_step, store, stored, vectors, whole, partial(mark, number)), len(step)
        wait_for_write()
    return embedded


def _store_step(
    store: VectorStore,
    chunks: list[StoredChunk],
    vectors: list[list[float]],
    whole: list[tuple[Paper, int]],
    mark: Callable[[], None],
) -> None:
    mark()  # the run's step first: another ingest settling the run then knows it is still writing
    store.add(chunks, vectors)
    store.list_papers(whole)  # after their last chunks: a record never claims more than the store holds


def _encode_step(
    step: list[tuple[Paper, Chunk, int]], chunk_pass: SentencePass, known: dict[str, list[float]], dimension: int | None
) -> tuple[dict[str, list[float]], list[tuple[Paper, Any]], int | None]:
    """The vectors of a step's chunk texts that need encoding and the sentence vectors of the papers the step
    completes, every one checked against the length of the index's vectors (then known, if it was not)."""
    texts = list(dict.fromkeys(c.text for _, c, _ in step if c.text not in known or chunk_pass.needs(c.text)))
    vectors = chunk_pass.embed(texts) if texts else None
    rows = chunk_pass.complete([p for p, c, n in step if c.index == n - 1])
    for dim in [*([vectors.shape[1]] if vectors is not None else []), *(v.shape[1] for _, v in rows)]:
        chunk_pass.embedder.check_dimension(int(dim), dimension)
        dimension = dimension or int(dim)
    return (dict(zip(texts, vectors.tolist(), strict=True)) if vectors is not None else {}), rows, dimension
