"""Keep secrets out of every line the user sees and every file we write: the API key, and credentials a
base URL may carry (http://user:KEY@host, ?api-key=KEY)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit, urlunsplit

from rag_assistant.config import Settings

MASK = "***"
_MIN_SECRET = 3  # shorter values ("v1", "1") would mask ordinary text without protecting anything


def redact_url(url: str) -> str:
    """The URL with its user info and query values masked."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return MASK
    netloc = parts.netloc
    if parts.username is not None or parts.password is not None:
        netloc = f"{MASK}@{host}" + (f":{parts.port}" if parts.port else "")
    query = "&".join(f"{k}={MASK}" for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def secrets_of(settings: Settings) -> list[str]:
    """Every secret value the settings hold, longest first (so that a key containing another is masked whole)."""
    found: list[str] = []
    pairs = ((settings.llm_api_key, settings.llm_base_url), (settings.embedding_api_key, settings.embedding_base_url))
    for key, url in pairs:  # the LLM's and the embedding server's
        if key is not None:
            found.append(key.get_secret_value())
        if url:
            try:
                parts = urlsplit(url)
                found += [parts.username or "", parts.password or "", parts.fragment]
                found += [v for _, v in parse_qsl(parts.query, keep_blank_values=True)]
            except ValueError:
                found.append(url)
    return sorted({s for s in found if len(s) >= _MIN_SECRET}, key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text
