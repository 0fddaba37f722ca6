"""LLM answerer: the answer prompt (prompts/answer_*.txt) over the retrieved abstracts, labelled [1]..[k],
sent through the LLM client (llm_client.py: retries, errors, usage, truncation); a streamed answer shows
citations only once they resolve (refs.CitationStream). A secret the client holds (the LLM's or the embedding
server's key, credentials in their URLs) that the model writes is masked in the answer and the stream."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rag_assistant.answer.citations import NOT_FOUND
from rag_assistant.answer.llm_client import LLMClient
from rag_assistant.answer.models import AnswerWarning, Draft, WarningKind
from rag_assistant.answer.prompts import load_prompt
from rag_assistant.answer.redact import scrub
from rag_assistant.answer.refs import CitationStream, Resolver
from rag_assistant.config import Settings
from rag_assistant.retrieve import Source

if TYPE_CHECKING:
    from rag_assistant.answer.analysis import PaperView, QuestionView

SURVEY_BATCH = 10  # papers per request: ~10 abstracts fit a 4k-token context, and one line each fits llm_max_tokens


def source_labels(sources: Sequence[Source], numbered: bool) -> dict[str, str]:
    """Prompt label -> paper id: "1".."k" (short, easy to copy; PaperQA2 does the same), or the ids themselves."""
    return {(str(i) if numbered else s.paper_id): s.paper_id for i, s in enumerate(sources, start=1)}


def format_sources(sources: Sequence[Source], labels: dict[str, str] | None = None) -> str:
    label_of = {pid: label for label, pid in (labels or {}).items()}
    blocks = []
    for s in sources:
        title = f"{s.paper.title}. " if s.paper.title else ""
        blocks.append(f"[{label_of.get(s.paper_id, s.paper_id)}] {title}{s.paper.text}")
    return "\n\n".join(blocks)


class LLMGenerator:
    mode = "llm"
    numbered_labels = True  # see docs/llm.md: SmolLM2 copies [1] more reliably than [004:17]

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = LLMClient(settings)
        self.model = self.client.model
        self.system = load_prompt("answer_system")
        self.user = load_prompt("answer_user")
        self.prompt_version = f"{self.system.version}+{self.user.version}"
        self.survey_system = load_prompt("survey_system")
        self.survey_user = load_prompt("survey_user")

    def answer(
        self, question: QuestionView, papers: Sequence[PaperView], on_token: Callable[[str], None] | None = None
    ) -> Draft:
        """The model's answer; streamed through on_token when given, with every citation held back until it
        resolves to a retrieved paper, and the client's secrets masked."""
        sources = [p.source for p in papers]
        labels = source_labels(sources, self.numbered_labels)
        example = "[1]" if self.numbered_labels else f"[{sources[0].paper_id if sources else '004:17'}]"
        system = self.system.format(not_found=NOT_FOUND, example=example)
        user = self.user.format(question=question.text, sources=format_sources(sources, labels))
        resolver = Resolver([s.paper_id for s in sources], labels)
        text, usage, warnings = self._complete(system, user, resolver, on_token)
        return Draft(text, self.model, self.prompt_version, usage, labels=labels, warnings=warnings)

    def survey(
        self, question: QuestionView, papers: Sequence[PaperView], on_token: Callable[[str], None] | None = None
    ) -> Draft:
        """One line per paper, written by the model in batches of SURVEY_BATCH papers (a short context window
        holds them), labelled [1]..[n] across batches so every label is unique; the chain then checks that
        every paper was cited or says which were left out."""
        sources = [p.source for p in papers]
        labels = source_labels(sources, self.numbered_labels)
        label_of = {pid: label for label, pid in labels.items()}
        system = self.survey_system.format(example="[1]" if self.numbered_labels else f"[{sources[0].paper_id}]")
        texts, warnings, usage = [], [], {}
        resolver = Resolver([s.paper_id for s in sources], labels)
        for start in range(0, len(sources), SURVEY_BATCH):
            batch = sources[start : start + SURVEY_BATCH]
            user = self.survey_user.format(
                question=question.text,
                count=str(len(batch)),
                sources=format_sources(batch, {label_of[s.paper_id]: s.paper_id for s in batch}),
            )
            text, used, notes = self._complete(system, user, resolver, on_token)
            if on_token is not None:
                on_token("\n\n")
            texts.append(text)
            warnings += notes
            for key, value in used.items():
                usage[key] = usage.get(key, 0) + value
        version = f"{self.survey_system.version}+{self.survey_user.version}"
        # one paragraph per line, so that each is verified and placed in its group on its own
        lines = [line.strip() for text in texts for line in text.splitlines() if line.strip()]
        return Draft("\n\n".join(lines), self.model, version, usage, labels=labels, warnings=warnings)

    def _complete(
        self, system: str, user: str, resolver: Resolver, on_token: Callable[[str], None] | None
    ) -> tuple[str, dict[str, int], list[AnswerWarning]]:
        """One completion: streamed through on_token when given (every citation held back until it resolves),
        never empty, the client's secrets masked, cut at the length bound. Returns text, usage, warnings."""
        if on_token is None:
            completion = self.client.complete(system, user)
        else:
            shown = CitationStream(on_token, resolver, self.client.secrets)
            completion = self.client.stream(system, user, shown)
            shown.flush()
        text = self._nonempty(completion.text)
        warnings = []
        if any(secret in text for secret in self.client.secrets):  # echoed from a prompt, a log, an error page
            text = scrub(text, self.client.secrets)
            warnings.append("the model's answer held a secret of this client (an API key or URL credential): masked")
        text, cut = self.client.bounded(text, completion.finish)
        return text, completion.usage, [AnswerWarning(WarningKind.GENERATION, w) for w in warnings + cut]

    def _nonempty(self, text: str) -> str:
        if not text.strip():
            raise self.client.error(
                "empty",
                f"the LLM ({self.model} at {self.client.where()}) returned an empty completion",
                "check the model name and that the server can run it; retry",
            )
        return text.strip()
