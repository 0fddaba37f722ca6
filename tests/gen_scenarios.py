"""A scripted model for eval-generate, good and bad (tests/test_generate*.py): a responder for the fake
OpenAI-compatible server that reads each request the way a model would and answers as the writer or the judge.

The good writer describes a paper by three of its longest words ("Which paper is about marginal, sparsity and
reconstruction?"): few word trigrams copied, and only that paper holds all three. The judge answers YES (with a
sentence of the abstract) exactly when every long word of the question (the template's own excepted) is in the
abstract (a question without one, about "models": every abstract on models); it meets a criterion "mentions
the word W" exactly when the abstract holds W. Each `mode` makes one thing go wrong, for one filter to catch."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from fake_llm import Status

TEMPLATE = {"approach", "described", "applied", "abstract", "mentions", "collection", "presents"}
LONG = re.compile(r"[a-z]{7,}")


def _user(req: dict[str, Any]) -> str:
    return str(req["messages"][-1]["content"])


def _system(req: dict[str, Any]) -> str:
    return str(req["messages"][0]["content"])


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def _abstract(text: str) -> str:
    return _between(text, "Abstract:\n", "\n\nReply")


def _long_words(text: str) -> list[str]:
    return list(dict.fromkeys(LONG.findall(text.lower())))


def markers(abstract: str, n: int = 3) -> list[str]:
    """The n longest words of the abstract (ties: first written), in the abstract's order."""
    words = _long_words(abstract)
    chosen = set(sorted(words, key=lambda w: (-len(w), words.index(w)))[:n])
    return [w for w in words if w in chosen]


def _listing(words: list[str]) -> str:
    return f"{', '.join(words[:-1])} and {words[-1]}"


def _sentence_with(abstract: str, word: str) -> str:
    for sentence in re.split(r"(?<=[.!?])\s+", abstract):
        if word in sentence.lower():
            return sentence
    return abstract.split(". ")[0]


def writer(text: str, mode: str) -> str:
    if "Which papers" in text and "Papers:\n" in text:
        return _survey(_between(text, "Papers:\n", "\n\nReply"), mode)
    abstract = _abstract(text)
    words = markers(abstract)
    answer = abstract.split(". ")[0]
    if mode == "malformed":
        return f"Sure! Here is a good question: Which paper is about {_listing(words)}?"
    if mode == "ill-formed":
        return json.dumps({"question": "What does this paper propose", "answer": answer})
    if mode == "copied":  # 14 words of the abstract's longest sentence that is not in the first person
        plain = [x for x in re.split(r"(?<=[.!?])\s+", abstract) if not re.search(r"\b(we|our|us)\b|[<>{}]", x, re.I)]
        phrase = re.sub(r"[^\w\s-]", "", max(plain, key=len)).split()[:14]
        return json.dumps({"question": f"Which paper says that {' '.join(phrase)}?", "answer": answer})
    if mode == "not-answered":  # a question the seed abstract does not answer
        return json.dumps(
            {"question": "Which paper measures graviton scattering inside rotating wormholes?", "answer": "-"}
        )
    if mode == "generic":  # nothing that sets its paper apart: every abstract answers it as well
        return json.dumps({"question": "Which paper is about the models it presents?", "answer": answer})
    if "adds one specific requirement" in text:
        return _unanswerable(words, mode)
    kind = "method" if "how the method" in text else "result" if "found or achieved" in text else "known-item"
    question = {
        "known-item": f"Which paper is about {_listing(words)}?",
        "method": f"How does the approach described by {_listing(words)} work?",
        "result": f"What did the work on {_listing(words)} find?",
    }[kind if mode != "same" else "known-item"]
    return json.dumps({"question": question, "answer": answer})


def _unanswerable(words: list[str], mode: str) -> str:
    if mode == "answerable":  # "unanswerable", but its seed paper answers it
        question = f"Which paper is about {_listing(words)}?"
    elif mode == "off-topic":
        question = "Which ski resorts near Ulaanbaatar open earliest in the winter season?"
    else:
        question = f"Which papers on {words[0]} have been applied to underwater baskets weaving?"
    return json.dumps({"question": question, "topic": words[0], "requirement": "applied to underwater baskets weaving"})


def _survey(listing: str, mode: str) -> str:
    papers = [p for p in re.split(r"\n\n(?=\[\d+\] )", listing) if p.strip()]
    counts = Counter(w for p in papers for w in _long_words(p))
    seed = _long_words(papers[0])
    if mode == "too-broad":
        word = "the"
    elif mode == "same":  # one question whatever the papers: 5 of the 38 bundled abstracts say "attention"
        word = "attention"
    elif mode == "too-narrow":  # no paper meets it
        word = "gravitons"
    else:
        usable = [w for w in seed if 2 <= counts[w] <= 4 and w not in TEMPLATE]
        word = max(usable, key=lambda w: (counts[w], -seed.index(w))) if usable else seed[0]
    return json.dumps(
        {
            "question": f"Which papers in the collection discuss {word}?",
            "criterion": f"Relevant if the abstract mentions {word}.",
        }
    )


def judge(text: str, mode: str) -> str:
    if text.startswith("Does the paper below meet the criterion?"):
        word = _between(text, "mentions ", ".").lower()
        abstract = _between(text, "Abstract:\n", "\n\nReply").lower()
        return "RELEVANT" if re.search(rf"\b{re.escape(word)}\b", abstract) else "NOT"
    question = _between(text, "Question:", "\n\nAbstract:").lower()
    abstract = _between(text, "Abstract:\n", "\n\nReply")
    wanted = [w for w in _long_words(question) if w not in TEMPLATE]
    if mode == "unreadable":
        return "Hmm, hard to say."
    if not all(w in abstract.lower() for w in wanted):
        return "NO"
    if mode == "false-quote":
        return "YES: The paper proves that every language model is a graviton."
    if not wanted:  # a vague question: any abstract on models answers it
        return f"YES: {_sentence_with(abstract, 'model')}" if "model" in abstract.lower() else "NO"
    return f"YES: {_sentence_with(abstract, wanted[0])}"


def responder(mode: str = "good", judge_mode: str = "good") -> Any:  # noqa: ANN401 - a fake_llm responder
    """A default responder for FakeLLMServer: writer requests by `mode`, judge requests by `judge_mode`."""

    def answer(req: dict[str, Any]) -> str | Status:
        text = _user(req)
        if "You write evaluation questions" in _system(req):
            return writer(text, mode)
        if "You check questions" in _system(req):
            return judge(text, judge_mode)
        return Status(400, {"error": {"message": f"unexpected request: {_system(req)[:60]}"}})

    return answer
