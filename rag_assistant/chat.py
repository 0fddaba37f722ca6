"""A conversation over the answer chain: follow-ups are condensed into standalone questions, and papers
shown earlier stay addressable by id ("tell me more about [004:17]") or by position ("the second one").

Condensing, extractive mode (no LLM), a documented rule. A new question is a fresh retrieval unless it
names a paper or refers back:
1. Paper ids the user writes (with or without brackets) that the conversation has seen are pinned: the
   answer comes from those abstracts only.
2. Else an ordinal ("the first/second/third/last one/paper") picks that paper from the list the user saw
   last: the last answer's references, in the order shown (an abstention's closest papers; after /sources,
   the sources). Past the end of the references it picks the next papers retrieved for that answer but not
   cited, and says so in a warning (so "the second one" after a one-paper answer is the best uncited
   source); past the retrieved papers too, a warning says there is no such paper.
3. Else a referring expression picks the last answer's cited papers (all of them for plural words, the
   first for singular ones), pinned, when the question does not stand on its own:
   - a demonstrative ("this paper", "that method", "these approaches") always refers back;
   - a pronoun or definite description ("it", "its", "they", "their", "the method", "both") refers back
     unless an earlier clause of the same question gives it an antecedent with topic words of its own
     ("Which papers propose new attention mechanisms, and what are their benefits?" stands alone);
   - topic shift: a question with two or more topic words of its own is fresh when a retrieval for it
     alone is relevant (above the abstention threshold) and includes none of the cited papers.
   Topic words are content words other than generic follow-up words (benefits, limitations, dataset...).
4. Else a short or elliptic follow-up ("and for vision?", "what about privacy?") is searched together with
   the previous standalone question's content words.
LLM mode: the same rules decide whether the question is a follow-up at all; a question that stands on its
own is searched as typed, without a condensing call. A follow-up is rewritten by prompts/condense.txt with
the recent turns, and the ids it keeps are pinned only if the conversation has shown them (a rewrite
cannot pin a paper from the index that the user never saw).

Parts: `Memory` (what the conversation has shown), `FollowUps` (the rules above, over one answer chain),
`to_markdown` (the export) and `ChatSession`, which asks the chain and remembers the answer."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rag_assistant.answer.chain import AnswerChain
from rag_assistant.answer.models import Answer
from rag_assistant.answer.question import check_question
from rag_assistant.corpus.models import Paper
from rag_assistant.text import content_words

if TYPE_CHECKING:
    from rag_assistant.answer.llm_client import LLMClient
    from rag_assistant.config import Settings
    from rag_assistant.retrieve import Source

ORDINALS = {"first": 0, "second": 1, "third": 2, "fourth": 3, "fifth": 4, "last": -1}
ORDINALS |= {"1st": 0, "2nd": 1, "3rd": 2, "4th": 3, "5th": 4}
_ORDINAL = re.compile(
    rf"\b(?:the\s+)?({'|'.join(ORDINALS)})\s+(?:one|paper|work|study|method|approach|result)s?\b", re.I
)
# Always point back: a demonstrative with a noun.
_DEMONSTRATIVE = re.compile(
    r"\b(?:this|that|these|those) (?:one|paper|method|approach|model|work|system|framework|technique|study|"
    r"papers|methods|approaches|models|works|systems|frameworks|techniques|studies)\b",
    re.I,
)
# Point back unless the question itself gives them an antecedent ("Which papers ..., and what are their ...").
_PRONOUN = re.compile(
    r"\b(?:it|its|they|them|their|both(?!\b.*\band\b)|"
    r"the (?:paper|method|approach|work|framework|technique|study|papers|methods|approaches|works))\b",
    re.I,
)
_PLURAL_HEAD = frozenset({"they", "them", "their", "these", "those", "both"})
_CLAUSE = re.compile(r"[,;:]|\b(?:and|but|or|then|while|whereas)\b", re.I)
_ELLIPTIC = re.compile(r"^\s*(and|what about|how about|also|or|but)\b", re.I)
# Words a follow-up uses about any paper; they give a question no topic of its own.
GENERIC = frozenset(
    """tell explain describe summarize summarise summary detail details elaborate main key idea ideas core
    contribution contributions benefit benefits advantage advantages limitation limitations drawback drawbacks
    weakness weaknesses strength strengths compare compared comparison differ difference differences different
    similar evaluate evaluated evaluation experiment experiments dataset datasets benchmark benchmarks baseline
    baselines perform performance outperform better best good well achieve achieves find finds finding
    findings problem problems solve solves address addresses handle handles motivation goal mean means example
    examples relate related authors know say says claim claims exactly else""".split()
)
_BRACKET = re.compile(r"\[([^\[\]\s]{1,80})\]")
_ID_SHAPE = re.compile(r"(?<![\w:])[\w.-]+:\d+(?![\w:])")
HISTORY_TURNS = 3


@dataclass
class Turn:
    question: str
    answer: Answer


@dataclass
class Condensed:
    query: str
    pinned: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # shown as warnings with the answer
    retrieved: list[Source] | None = None  # what a search for `query` found while deciding (the topic shift)


@dataclass
class Memory:
    """What the conversation has shown: its turns, every paper retrieved or cited (by id), and the list an
    ordinal counts in: the papers the user saw last, in the order shown (`shown` of them were on screen), then
    the rest of the last answer's retrieved papers."""

    id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    turns: list[Turn] = field(default_factory=list)
    papers: dict[str, Paper] = field(default_factory=dict)
    listing: list[str] = field(default_factory=list)
    shown: int = 0

    @property
    def last(self) -> Answer | None:
        return self.turns[-1].answer if self.turns else None

    def remember(self, question: str, answer: Answer) -> None:
        for source in answer.sources:
            self.papers.setdefault(source["paper_id"], _paper(source))
        cited = [r.paper_id for r in answer.references]
        retrieved = [s["paper_id"] for s in answer.sources]
        self.listing = cited + [p for p in retrieved if p not in cited]
        # an abstention lists its closest papers, numbered; an answer shows only its references
        self.shown = len(retrieved) if answer.abstained else len(cited)
        self.turns.append(Turn(question, answer))

    def sources_shown(self) -> None:
        """/sources printed the last answer's retrieved papers, numbered: ordinals now count in that list."""
        if self.last is not None:
            self.listing = [s["paper_id"] for s in self.last.sources]
            self.shown = len(self.listing)


class FollowUps:
    """Decides what a question retrieves for (the module docstring's rules), given the conversation so far and
    the chain that will answer it; `llm` rewrites follow-ups in llm mode (None: the rules alone)."""

    def __init__(self, memory: Memory, chain: AnswerChain, llm: LLMClient | None) -> None:
        self.memory = memory
        self.chain = chain
        self.llm = llm

    def mentioned_ids(self, text: str) -> list[str]:
        """Ids of indexed papers that the text names (seen in this conversation, bracketed, or id-shaped)."""
        papers = self.memory.papers
        seen = [pid for pid in papers if re.search(rf"(?<![\w:]){re.escape(pid)}(?![\w:])", text)]
        shaped = [m.strip() for m in _BRACKET.findall(text)] + _ID_SHAPE.findall(text)
        candidates = list(dict.fromkeys(seen + [c for c in shaped if c not in papers]))
        if len(candidates) > len(seen):
            found = self.chain.retriever.papers(candidates)
            papers.update(found)
            candidates = [c for c in candidates if c in found]
        return sorted(candidates, key=text.find)

    def condense(self, question: str) -> Condensed:
        if ids := self.mentioned_ids(question):
            return Condensed(_with_labels(question, ids), ids)
        last = self.memory.last
        if last is None:
            return Condensed(question)
        ordinal = _ORDINAL.search(question)
        cited = last.citations
        refers, fresh = bool(ordinal), None
        if not refers and cited and _DEMONSTRATIVE.search(question):
            refers = True
        elif not refers and cited and _dangling(question):
            fresh = self._fresh_topic(question, cited)
            refers = fresh is None
        elliptic = bool(_ELLIPTIC.search(question)) or len(content_words(question)) <= 1
        if not (refers or elliptic):
            return Condensed(question, retrieved=fresh)  # stands on its own: a fresh retrieval, in either mode
        if self.llm is not None:
            return self._condense_llm(question, self.llm)
        if ordinal:
            return self._ordinal(question, ordinal)
        if refers:
            match = _DEMONSTRATIVE.search(question) or _PRONOUN.search(question)
            ids = list(cited) if match and _is_plural(match.group(0)) else cited[:1]
            return Condensed(_with_labels(question, ids), ids)
        previous = self.memory.turns[-1].answer.condensed_question or self.memory.turns[-1].question
        return Condensed(f"{question} {' '.join(dict.fromkeys(content_words(previous)))}")

    def _ordinal(self, question: str, match: re.Match[str]) -> Condensed:
        """The paper at that position of the list the user saw last (see the module docstring)."""
        index, phrase = ORDINALS[match.group(1).lower()], match.group(0)
        listing, shown = self.memory.listing, self.memory.shown
        if index == -1:
            index = (shown or len(listing)) - 1
        if not 0 <= index < len(listing):
            return Condensed(question, notes=[f'the last answer has no "{phrase}": it showed {shown} paper(s)'])
        pid = listing[index]
        notes = []
        if index >= shown:
            notes.append(
                f'the last answer showed {shown} paper(s); "{phrase}" is taken to be [{pid}], '
                "the next paper retrieved for it (/sources lists them)"
            )
        return Condensed(_with_labels(question, [pid]), [pid], notes)

    def _fresh_topic(self, question: str, cited: list[str]) -> list[Source] | None:
        """The retrieval for the question alone when it has a topic of its own that this retrieval answers
        without the cited papers (a topic shift: rule 3), else None. Word overlap with the cited abstracts
        cannot tell: a jailbreak abstract that mentions REINFORCE and sample efficiency shares every keyword of
        an RL sample-efficiency question, yet ranks nowhere for it."""
        if len(set(_topic_words(question))) < 2:
            return None  # "do they use attention?" asks about the papers, whatever else mentions attention
        sources = self.chain.retriever.search(question)
        if not sources or self.chain.relevance(question, sources) < self.chain.settings.abstain_threshold:
            return None
        return None if {s.paper_id for s in sources} & set(cited) else sources

    def _condense_llm(self, question: str, llm: LLMClient) -> Condensed:
        from rag_assistant.answer.prompts import load_prompt

        turns = self.memory.turns[-HISTORY_TURNS:]
        history = "\n".join(f"User: {t.question}\nAssistant: {t.answer.answer}" for t in turns)
        prompt = load_prompt("condense").format(history=history, question=question)
        text = llm.complete("You rewrite follow-up questions.", prompt).text
        standalone = text.strip().splitlines()[0].strip() if text.strip() else question
        # only papers this conversation has shown: a rewrite must not pin one the user never saw
        ids = [p for p in self.mentioned_ids(standalone) if p in self.memory.papers]
        return Condensed(standalone, ids)


class ChatSession:
    """One conversation: each question resolved by the follow-up rules, answered by the chain, remembered."""

    def __init__(self, chain: AnswerChain, llm: LLMClient | None = None) -> None:
        self.chain = chain
        self.memory = Memory()
        self.follow_ups = FollowUps(self.memory, chain, llm if llm is not None else _condenser(chain))

    def reset(self) -> None:
        self.memory = Memory()
        self.follow_ups.memory = self.memory

    def use_settings(self, settings: Settings) -> None:
        """Answer with these settings from now on (chat's /mode): a new chain over the same retriever, and the
        LLM client that condenses follow-ups when they mean llm mode. A ConfigError (llm mode without an LLM)
        changes nothing."""
        chain = AnswerChain(settings, self.chain.retriever, log=self.chain.log)
        self.chain, self.follow_ups = chain, FollowUps(self.memory, chain, _condenser(chain))

    @property
    def filtered(self) -> str:
        """The filter every question is held to (/filter or the flags), described; "" when none."""
        from rag_assistant.index.filters import describe

        return describe(self.chain.retriever.where)

    def set_filter(self, text: str) -> str:
        """Chat's /filter: `off` clears it; `FIELD=VALUE ...` (author="Ada Lovelace" year=2023- topic=fairness
        venue=ICML; a field given twice: any of its values) holds every later question to those papers, as the
        flags do, replacing the filter before. Returns it, described. FilterError when malformed or naming a
        field, author or topic the index lacks (the filter before stays)."""
        if text.strip().lower() in ("off", "none", "clear"):
            self.chain.retriever.where = []
        elif text.strip():
            from rag_assistant.answer.authors import filters_from

            self.chain.retriever.restrict(filters_from(_field_values(text)))
        return self.filtered

    def ask(self, question: str, on_token=None) -> Answer:  # noqa: ANN001 - Callable[[str], None] | None
        # checked before condensing, which may call the LLM: an empty question costs nothing and is not logged
        question, notes = check_question(question, self.chain.settings.max_question_chars)
        condensed = self.follow_ups.condense(question)
        answer = self.chain.ask(
            question,
            on_token=on_token,
            kind="chat",
            session=self.memory.id,
            retrieval_query=condensed.query,
            pinned=condensed.pinned or None,
            retrieved=condensed.retrieved,
        )
        answer.warnings[:0] = notes + condensed.notes
        self.memory.remember(question, answer)
        return answer


def _field_values(text: str) -> dict[str, str | list[str]]:
    """`author="Ada Lovelace" year=2024` as {"author": "Ada Lovelace", "year": "2024"} (a field twice: a list)."""
    import shlex

    from rag_assistant.errors import FilterError

    usage = 'write /filter FIELD=VALUE ..., e.g. /filter author="Ada Lovelace" year=2023-, or /filter off'
    try:
        words = shlex.split(text)
    except ValueError:
        raise FilterError(f"malformed filter {text!r}: unbalanced quotes", usage) from None
    out: dict[str, str | list[str]] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise FilterError(f"malformed filter {word!r}", usage)
        held = out.get(key.strip())
        out[key.strip()] = value.strip() if held is None else [*([held] if isinstance(held, str) else held), value]
    return out


def to_markdown(memory: Memory) -> str:
    """The conversation as Markdown: each question, what it searched for, the answer with its references."""
    lines = [f"# rag-assistant conversation {memory.id}", ""]
    for i, turn in enumerate(memory.turns, start=1):
        a = turn.answer
        lines += [f"## {i}. {turn.question}", ""]
        if a.condensed_question:
            lines += [f"*Searched for: {a.condensed_question}*", ""]
        lines += [a.answer, ""]
        if a.references:
            lines += ["**References**", ""]
            lines += [
                f"- [{r.paper_id}] {r.byline or f'{r.source} #{r.position}'}: "
                f"{r.title + '. ' if r.title else ''}{r.snippet}"
                for r in a.references
            ]
            lines.append("")
        if a.warnings:
            lines += [f"> warning: {w}" for w in a.warnings] + [""]
        lines += [f"*{a.mode} · {a.model}*", ""]
    return "\n".join(lines)


def _condenser(chain: AnswerChain) -> LLMClient | None:
    """The LLM client that condenses follow-ups: only when the chain answers with the LLM."""
    if chain.mode != "llm":
        return None
    from rag_assistant.answer.llm_client import LLMClient

    return LLMClient(chain.settings)


def _with_labels(question: str, ids: list[str]) -> str:
    """The question plus the pinned ids, so that the log and /save show what 'it' resolved to."""
    missing = [p for p in ids if f"[{p}]" not in question]
    return f"{question} [{']['.join(missing)}]" if missing else question


def _dangling(question: str) -> bool:
    """A pronoun or definite description without an antecedent in an earlier clause of the question."""
    return any(not _antecedent_before(question, m.start()) for m in _PRONOUN.finditer(question))


def _is_plural(phrase: str) -> bool:
    words = phrase.lower().split()
    return words[0] in _PLURAL_HEAD or (len(words) > 1 and words[-1].endswith("s"))


def _topic_words(text: str) -> list[str]:
    return [w for w in content_words(text) if w not in GENERIC]


def _antecedent_before(question: str, start: int) -> bool:
    """An earlier clause of the question has topic words of its own, so a pronoun after it can point there."""
    cuts = list(_CLAUSE.finditer(question, 0, start))
    return bool(cuts) and bool(_topic_words(question[: cuts[-1].start()]))


def _paper(source: dict) -> Paper:
    return Paper(
        source["paper_id"],
        source["text"],
        source["source"],
        source["position"],
        source.get("title"),
        source.get("metadata") or {},
    )
