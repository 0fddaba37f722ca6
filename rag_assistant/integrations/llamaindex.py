"""LlamaIndex integration: our hybrid retriever (dense + keyword, fused, one hit per paper) as a LlamaIndex
`BaseRetriever` (PaperRetriever), our LLM settings as a LlamaIndex `OpenAILike` (llm) and both as a
`RetrieverQueryEngine` (query_engine). Importing this module imports LlamaIndex (~2 s), so nothing else in the
package imports it: `from rag_assistant.integrations.llamaindex import PaperRetriever, query_engine`. LlamaIndex
is an extra: `pip install "rag-assistant[llamaindex]"`.

Answers from query_engine are LlamaIndex's: its prompt, its synthesis, NOT checked by our citation checker.
`rag-assistant ask` (AnswerChain) is the verified path."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as missing:
    raise ImportError(
        'rag_assistant.integrations.llamaindex needs LlamaIndex: pip install "rag-assistant[llamaindex]"'
    ) from missing

from rag_assistant.config import Settings, load_settings
from rag_assistant.errors import ConfigError
from rag_assistant.retrieve import Retriever, Source

if TYPE_CHECKING:
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.llms.openai_like import OpenAILike

DEFAULT_BASE_URL = "https://api.openai.com/v1"  # as rag_assistant/answer/llm_client.py
CONTEXT_WINDOW = 32768  # LlamaIndex packs retrieved text into prompts by this; its default (3900) splits k=5 abstracts
LLM_METADATA = ("paper_id",)  # the metadata LlamaIndex shows the LLM next to each abstract (the rest is for callers)


def node(source: Source) -> NodeWithScore:
    """One retrieved paper as a LlamaIndex node: id = paper id, text = title (when the paper has one) + abstract,
    score = our fused score. Metadata: the paper's own (e.g. urls), then paper_id, title (the title, else the
    abstract's opening words), source file, position in it, rank and the dense (cosine) and keyword (BM25) scores."""
    paper = source.paper
    text = f"{paper.title}\n\n{paper.text}" if paper.title else paper.text
    metadata: dict[str, Any] = {
        **paper.metadata,
        "paper_id": paper.paper_id,
        "title": paper.label,
        "source": paper.source,
        "position": paper.position,
        "rank": source.rank,
        "dense_score": source.dense_score,
        "keyword_score": source.keyword_score,
    }
    hidden = [key for key in metadata if key not in LLM_METADATA]
    text_node = TextNode(
        id_=paper.paper_id,
        text=text,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=hidden,
    )
    return NodeWithScore(node=text_node, score=source.score)


class PaperRetriever(BaseRetriever):
    """Our Retriever for LlamaIndex pipelines: one NodeWithScore per paper, in our rank order (see `node`).

    `settings` say which index to search (default: load_settings(), i.e. flags-free config file and environment);
    pass an existing `retriever` to share its loaded index and embedding model. `k` papers per query
    (default: settings.top_k)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        retriever: Retriever | None = None,
        k: int | None = None,
        **kwargs: Any,  # noqa: ANN401 - BaseRetriever's own options (callback_manager, verbose ...)
    ) -> None:
        if retriever is None:
            retriever = Retriever(settings if settings is not None else load_settings())
        self.retriever = retriever
        self.k = k
        super().__init__(**kwargs)

    @property
    def settings(self) -> Settings:
        return self.retriever.settings

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [node(source) for source in self.retriever.search(query_bundle.query_str, self.k)]


def llm(settings: Settings | None = None) -> OpenAILike:
    """A LlamaIndex OpenAILike for our LLM settings, configured as our own client (llm_client.py) is: model, base
    URL (default OpenAI's), API key ("not-needed" without one), temperature, max tokens, timeout, retries.
    Raises ConfigError when no LLM is configured (neither a base URL nor an API key)."""
    from llama_index.llms.openai_like import OpenAILike

    s = settings if settings is not None else load_settings()
    if not s.llm_configured:
        raise ConfigError(
            "no LLM is configured for the LlamaIndex query engine",
            "set OPENAI_BASE_URL (any OpenAI-compatible server) or OPENAI_API_KEY, or the llm_base_url / "
            "llm_api_key settings; PaperRetriever alone needs no LLM",
        )
    return OpenAILike(
        model=s.llm_model,
        api_base=s.llm_base_url or DEFAULT_BASE_URL,
        api_key=s.llm_api_key.get_secret_value() if s.llm_api_key else "not-needed",
        temperature=s.llm_temperature,
        max_tokens=s.llm_max_tokens,
        timeout=s.llm_timeout,
        max_retries=s.llm_max_retries,
        is_chat_model=True,
        context_window=CONTEXT_WINDOW,
    )


def query_engine(
    settings: Settings | None = None,
    k: int | None = None,
    *,
    retriever: Retriever | None = None,
    **kwargs: Any,  # noqa: ANN401 - passed to RetrieverQueryEngine.from_args (response_mode, streaming ...)
) -> RetrieverQueryEngine:
    """A LlamaIndex RetrieverQueryEngine: PaperRetriever (k papers) + llm(settings); `response.source_nodes` are
    our papers. Its answers are LlamaIndex's (its prompts and synthesis) and are NOT verified by our citation
    checker: no check that each sentence is supported by the paper it cites, no abstention. For verified, cited
    answers use `rag-assistant ask` (AnswerChain). Raises ConfigError when no LLM is configured."""
    from llama_index.core.query_engine import RetrieverQueryEngine

    s = settings if settings is not None else (retriever.settings if retriever else load_settings())
    model = llm(s)  # first: no LLM configured fails before the index is opened
    return RetrieverQueryEngine.from_args(PaperRetriever(s, retriever=retriever, k=k), llm=model, **kwargs)
