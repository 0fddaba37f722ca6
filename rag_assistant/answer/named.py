"""Metadata a question names ("papers by X", "X's paper on Y", "in the <track> track", "from 2024", "published
after 2023"), turned into the same filters as --author/--topic/--year (index/filters.py) when the question is
planned (plan.py). Conservative on purpose: an author is only a name of the index's author list, said where
people name authors (by X, X's papers, did X co-author, has X published, X et al.), so a capitalised method
name ("papers by Adam") that is nobody's name filters nothing. Names match as people write them: any case,
accents folded, middle names and initials optional, "Last, First", a surname alone when one author has it.
A question with none of the cue words costs one regex: the index's fields are read only when a cue is there."""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rag_assistant.corpus.fields import name_key
from rag_assistant.index.filters import Catalogue, describe, parse_years
from rag_assistant.index.keyword_fields import FieldFilter

# Any of these words, or a year, and the question may name metadata (otherwise nothing is read)
_CUE = re.compile(
    r"\b(?-i:by [A-Z])|\b(papers?|works?|publications?|articles?) (\w+ )?by\b"
    r"|['’]s (papers?|works?|publications?|articles?)\b|\bco-?author(ed|s)?\b|\bauthored\b|\bpublish(ed|es)?\b"
    r"|\bpublications?\b|\bwr[io]tes?\b|\bwritten\b"
    r"|\bet al\b|\btracks?\b"
    r"|^\s*(list |show (me )?|find )?(all )?(the )?\w[\w ,/&-]{2,60}? papers? (on|about|that|which)\b"
    r"|\b(from|in|after|before|since|between|during|until|to|and|than) (19|20)\d\d\b",
    re.I,
)
_PERSON_CUE = re.compile(
    r"\bco-?author(ed|s)?\b|\bauthored\b|\bhas .{2,60} (published|written|authored)\b|\bwr[io]tes?\b|\bpublications\b"
    r"|\bdid .{2,60} (write|publish|author)\b",
    re.I,
)
_WORKS = r"(papers?|works?|publications?|articles?|research)"
_BEFORE = {"by", "from", "of"}  # "papers by X", "work of X"
# lower-case words inside names ("Guy van den Broeck"); not "bin", also a given name ("Bin Yang")
_PARTICLES = {"van", "von", "den", "der", "de", "del", "della", "di", "da", "du", "le", "la", "al", "el", "dos"}
_TOKEN = re.compile(r"[^\W\d_][\w.'’-]*|,|\d+", re.U)
_POSSESSIVE = re.compile(r"['’]s?$")
# A person named where only authors are named, whether or not the index knows them (say so when it does not)
_NAME = r"(?P<name>[A-Z][\w.'’-]+(?: (?:[A-Z][\w.'’-]+|van|von|de|den|der|di|da|le|la)){1,3})"


def _person_forms(name: str) -> list[re.Pattern[str]]:
    """Where a question names a person as an author: papers by NAME, did NAME co-author, NAME's papers."""
    return [
        re.compile(
            rf"\b(?i:{_WORKS}) (?:(?:written|authored|co-?authored|published) )?(?:by|of) {name}(?=['’]s\b|\W|$)"
        ),
        re.compile(rf"\bdid {name} (?:co-?)?(?:author|write|publish)"),
        re.compile(rf"\bhas {name} (?:published|written|co-?authored|authored)"),
        re.compile(rf"\b{name}['’]s? {_WORKS}\b"),
    ]


_PERSON_FORMS = _person_forms(_NAME)
_SURNAME_FORMS = _person_forms(r"(?P<name>[A-Z][\w'’-]+)")  # "papers by Liang": a surname several authors may share
_LISTING = re.compile(
    rf"\b(papers|works|publications|articles)\b|\bco-?author(ed|s)?\b|\bauthored\b|\bpublished\b|\bwr[io]tes?\b"
    rf"|\bwritten\b|^\s*{_WORKS} by\b",
    re.I,
)
_TRACK_STOP = {
    "the", "in", "from", "of", "on", "for", "within", "under", "a", "an", "at", "which", "what", "list", "show",
    "me", "all", "any", "papers", "paper", "is", "are", "there", "to", "and", "find", "give",
}  # fmt: skip
_TRACK_PAPERS = re.compile(
    r"^\s*(?:(?:list|show(?: me)?|find|give me)\s+)?(?:all\s+)?(?:the\s+)?([a-z][a-z ,/&-]{2,60}?)\s+papers?\s+"
    r"(?:on|about|that|which)\b",
    re.I,
)
_YEAR = r"((?:19|20)\d\d)"
# Each form with the year range it means ("-2023": up to 2023), from its one or two years; the last form takes
# only a year the index has ("in 2024" is a year; "in 1999 words" is not asked of an index without 1999)
_YEAR_FORMS: list[tuple[re.Pattern[str], Callable[[int, int], str]]] = [
    (re.compile(rf"\bbetween {_YEAR} and {_YEAR}\b", re.I), lambda a, b: f"{a}-{b}"),
    (re.compile(rf"\bfrom {_YEAR} (?:to|until|through) {_YEAR}\b", re.I), lambda a, b: f"{a}-{b}"),
    (
        re.compile(rf"\b(?:published |written |appeared )?(?:after|later than) {_YEAR}\b", re.I),
        lambda a, _: f"{a + 1}-",
    ),
    (
        re.compile(rf"\b(?:published |written )?(?:since|from) {_YEAR}(?: on(?:wards?)?| or later)\b", re.I),
        lambda a, _: f"{a}-",
    ),
    (
        re.compile(rf"\b(?:published |written )?(?:before|prior to|earlier than) {_YEAR}\b", re.I),
        lambda a, _: f"-{a - 1}",
    ),
    (re.compile(rf"\b(?:published |written |appeared )?(?:from|since) {_YEAR}\b", re.I), lambda a, _: f"{a}"),
    (re.compile(rf"\b(?:published|written|appeared) in {_YEAR}\b", re.I), lambda a, _: f"{a}"),
]
_IN_YEAR = re.compile(rf"\b(?:in|during) {_YEAR}\b", re.I)


@dataclass(frozen=True)
class Named:
    """What a question names: `filters` (resolved, as index/filters.resolve gives them), `listing` when it asks
    for an author's papers (answered from the metadata: answer/authors.py), `unknown` a name said as an author
    that is nobody's in the index (with the closest names), `empty` a filter that no paper passes."""

    filters: tuple[FieldFilter, ...] = ()
    authors: tuple[str, ...] = ()
    listing: bool = False
    unknown: str = ""
    closest: tuple[str, ...] = ()
    empty: str = ""
    spans: tuple[tuple[int, int], ...] = field(default=(), compare=False)  # where the metadata was named
    several: bool = False  # `unknown` is a surname several authors share: `closest` are they

    def __bool__(self) -> bool:
        return bool(self.filters or self.unknown or self.empty)

    @property
    def shown(self) -> str:
        """`authors = Percy Liang, topic = ...`: what the answer was restricted to."""
        return describe(self.filters)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"filtered": self.shown} if self.filters else {}
        if self.listing:
            out["authors"] = list(self.authors)
        if self.unknown:
            out["several_authors" if self.several else "unknown_author"] = self.unknown
            out["closest_authors"] = list(self.closest)
        if self.empty:
            out["no_papers"] = self.empty
        return out


def may_name_metadata(question: str) -> bool:
    """Whether the question has a word that may name metadata (cheap: decides whether the fields are read)."""
    return bool(_CUE.search(question))


class Names:
    """The index's authors by the keys a question may write them with: the whole name, first and last name
    (middle names left out), the surname alone (used only when one author has it and the abstracts never use it
    as a word: "Adam" is an optimiser before it is Hartwig Adam)."""

    def __init__(self, authors: Counter, abstract_words: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.words = abstract_words  # lower case: a surname that is also a word of the abstracts ("Adam") is no name
        self.full: dict[str, set[str]] = {}
        self.short: dict[str, set[str]] = {}
        self.surname: dict[str, set[str]] = {}
        for name in authors:
            key = name_key(str(name))
            if not key:
                continue
            words = key.split()
            self.full.setdefault(key, set()).add(str(name))
            if len(words) > 2:
                self.short.setdefault(f"{words[0]} {words[-1]}", set()).add(str(name))
            self.surname.setdefault(words[-1], set()).add(str(name))

    def lookup(self, words: list[str], capitalised: bool) -> set[str]:
        """The authors these words name: exactly, by first and last name, or (capitalised, one word) a surname
        only one author has. Empty when they name nobody, or several people by a shared surname."""
        key = name_key(" ".join(words))
        if not key:
            return set()
        if len(key.split()) == 1:
            found = self.surname.get(key, set()) if capitalised and key not in self.words else set()
            return found if len({name_key(n) for n in found}) == 1 else set()
        if key in self.full:
            return self.full[key]
        return self.short.get(key, set()) if len({name_key(n) for n in self.short.get(key, ())}) == 1 else set()

    def sharing(self, surname: str) -> list[str]:
        """The people with this surname (one spelling each), when it is no word of the abstracts."""
        key = name_key(surname)
        if " " in key or not key or key in self.words:
            return []
        by_key = {name_key(n): n for n in sorted(self.surname.get(key, ()))}
        return sorted(by_key.values())

    def closest(self, name: str, n: int = 3) -> list[str]:
        keys = difflib.get_close_matches(name_key(name), list(self.full), n=n, cutoff=0.6)
        return [sorted(self.full[k])[0] for k in keys]


def detect(question: str, fields: Catalogue, names: Names | None, vocabulary: set[str]) -> Named:
    """The metadata the question names, as filters on the fields this index holds (module docstring).
    `vocabulary`: lower-case words of the abstracts, which a name said as an author but unknown must not be
    (then it is probably a method, "papers by Transformer Models", not a person)."""
    if not may_name_metadata(question):
        return Named()
    filters: list[FieldFilter] = []
    spans: list[tuple[int, int]] = []
    authors: list[str] = []
    unknown, closest, empty, several = "", (), "", False
    if names is not None and "authors" in fields:
        groups, spans = _authors(question, names)
        authors = [_spelling(g) for g in groups]
        filters += [FieldFilter("authors", (a,)) for a in authors]  # one spelling: filters compare name keys
        if not groups:
            unknown, closest, several = _unknown_person(question, names, vocabulary)
    if "topic" in fields:
        topic, missing = _track(question, fields["topic"])
        filters += [topic] if topic else []
        empty = empty or missing
    if "year" in fields:
        year, missing = _year(question, fields["year"])
        filters += [year] if year else []
        empty = empty or missing
    listing = bool(authors) and bool(_LISTING.search(question)) and not _one_paper(question)
    return Named(tuple(filters), tuple(authors), listing, unknown, tuple(closest), empty, tuple(spans), several)


def _spelling(names: set[str]) -> str:
    """One person's name as shown, of the spellings the papers use ("Jurgen"/"Jürgen"): the one with accents."""
    return sorted(names, key=lambda n: (-sum(not c.isascii() for c in n), n))[0]


def _one_paper(question: str) -> bool:
    """ "X's paper on Y", "the paper by X that ...": one paper of the author, answered as a question about it."""
    return bool(re.search(r"['’]s paper\b|\b(the|a|one|which) paper\b", question, re.I)) and not re.search(
        r"\bpapers\b", question, re.I
    )


def _tokens(question: str) -> list[tuple[str, int, int]]:
    """Words with their offsets; a final period kept only on an initial ("N."), not on a sentence's last word."""
    out = []
    for m in _TOKEN.finditer(question):
        word = m.group(0)
        if len(word) > 2 and word.endswith("."):
            word = word.rstrip(".")
        out.append((word, m.start(), m.start() + len(word)))
    return out


def _authors(question: str, names: Names) -> tuple[list[set[str]], list[tuple[int, int]]]:
    """The authors the question names where an author is named, longest names first, each once."""
    tokens = _tokens(question)
    taken: set[int] = set()
    groups: list[set[str]] = []
    spans: list[tuple[int, int]] = []
    person_cue = bool(_PERSON_CUE.search(question))
    for size in (5, 4, 3, 2, 1):
        for i in range(len(tokens) - size + 1):
            window = list(range(i, i + size))
            if taken & set(window):
                continue
            words = [tokens[j][0] for j in window]
            found = _name_in(words, names)
            if not found or not _cued(tokens, i, i + size, person_cue, size == 1):
                continue
            if any(found & g for g in groups):
                continue
            groups.append(found)
            taken |= set(window)
            spans.append((tokens[i][1], tokens[i + size - 1][2]))
    return groups, spans


def _name_in(words: list[str], names: Names) -> set[str]:
    """The author these tokens spell: "First Last", "Last, First", possessive dropped."""
    if words[0] == "," or words[-1] == ",":
        return set()
    if words.count(",") > 1 or any(w.isdigit() for w in words):
        return set()
    clean = [_POSSESSIVE.sub("", w) if w[-2:] in ("'s", "’s") else w for w in words]
    if any(w.endswith(("'s", "’s")) for w in words[:-1]):
        return set()  # a possessive ends a name
    if "," in clean:
        cut = clean.index(",")
        clean = clean[cut + 1 :] + clean[:cut]
    capitalised = all(w[:1].isupper() for w in clean if w.lower() not in _PARTICLES)
    return names.lookup(clean, capitalised)


def _cued(tokens: list[tuple[str, int, int]], start: int, end: int, person_cue: bool, surname: bool) -> bool:
    """Whether the words at [start, end) stand where people name authors: after "by"/"of"/"from" (with a word
    for papers in the question), before "'s" or "et al.", before "papers", or in a question about writing
    and publishing. A surname alone only after "by" or before "'s papers"/"et al." (a lone capitalised word
    elsewhere is more often a method)."""
    before = tokens[start - 1][0].lower() if start else ""
    after = [t[0].lower() for t in tokens[end : end + 2]]
    last = tokens[end - 1][0]
    possessive = last.endswith(("'s", "’s"))
    works = bool(after) and re.fullmatch(_WORKS, after[0]) is not None
    et_al = after[:2] == ["et", "al"] or after[:1] == ["et"]
    if surname:
        return (before == "by" and not _method_before(tokens, start)) or (possessive and works) or et_al
    text = " ".join(t[0].lower() for t in tokens)
    return (
        (before in _BEFORE and re.search(_WORKS, text) is not None)
        or before == "by"
        or possessive
        or et_al
        or works
        or person_cue
    )


def _method_before(tokens: list[tuple[str, int, int]], start: int) -> bool:
    """ "trained by Adam", "optimised by Newton": a verb before "by" says the word is a tool, not an author."""
    word = tokens[start - 2][0].lower() if start >= 2 else ""
    return word.endswith("ed") and word not in ("authored", "co-authored", "coauthored", "published", "written")


def _unknown_person(question: str, names: Names, vocabulary: set[str]) -> tuple[str, list[str], bool]:
    """A name in an author form ("papers by Jane Roe") that is nobody's here, with the closest names; or a
    surname alone ("papers by Liang") that several authors have, with them (the third value: several)."""
    for form in _PERSON_FORMS:
        for m in form.finditer(question):
            name = _POSSESSIVE.sub("", m.group("name")).strip().rstrip(".")
            words = name.split()
            if any(w.lower() in vocabulary or w.lower() in names.words for w in words if w.lower() not in _PARTICLES):
                continue  # a word of the abstracts ("Monte Carlo", "Gradient Descent"): a method, not a person
            if not names.lookup(words, capitalised=True):
                return name, names.closest(name), False
    for form in _SURNAME_FORMS:
        for m in form.finditer(question):
            word = _POSSESSIVE.sub("", m.group("name")).rstrip(".")
            people = names.sharing(word)
            if len(people) > 1:
                return word, people, True
    return "", [], False


def _track(question: str, topics: Counter) -> tuple[FieldFilter | None, str]:
    """ "in the <track> track", "<track> papers on Y": the topics whose words hold the words named."""
    text = question.lower()
    phrases: list[tuple[str, bool, bool]] = []  # (words, said with "track", said as "the <words> track")
    for m in re.finditer(r"\btracks?\b(?! of\b)", text):
        words = re.findall(r"[\w/&-]+", text[: m.start()])
        phrase: list[str] = []
        while words and words[-1] not in _TRACK_STOP:
            phrase.insert(0, words.pop())
        if phrase and not re.fullmatch(r"(keep|keeps|keeping|kept|lose|losing|lost|fast|on)", phrase[-1]):
            # "in the <track> track" names a track for sure: said so when no track has those words
            phrases.append((" ".join(phrase), True, bool(words) and words[-1] == "the"))
    if not phrases and (m := _TRACK_PAPERS.match(question)):
        phrases.append((m.group(1).lower().strip(), False, False))
    for phrase, track, said in phrases:
        words = phrase.split()
        for cut in range(len(words) if track else 1):  # "do graph neural networks track": its longest track part
            chosen = _topics_with(" ".join(words[cut:]), topics, whole_part=not track)
            if chosen:
                return FieldFilter("topic", tuple(chosen)), ""
        if said:
            return None, f"no track of this index matches {phrase!r}"
    return None, ""


def _topics_with(phrase: str, topics: Counter, whole_part: bool) -> list[str]:
    """Topics containing the phrase (said with "track": its words in order, any case, "RL" for reinforcement
    learning not guessed); without "track", only a phrase that is a whole part of a topic ("Reinforcement
    Learning" of "Reinforcement Learning->Deep RL"), so "Efficient attention papers on ..." filters nothing."""
    wanted = re.findall(r"\w+", phrase)
    out = []
    for topic in topics:
        parts = [re.findall(r"\w+", p.lower()) for p in str(topic).split("->")]
        if whole_part:
            hit = any(p == wanted or p == [*wanted[:-1], wanted[-1].rstrip("s")] for p in parts)
        else:
            words = [w for p in parts for w in p]
            hit = any(words[i : i + len(wanted)] == wanted for i in range(len(words)))
        if hit:
            out.append(str(topic))
    return sorted(out)


def _years(m: re.Match[str]) -> tuple[int, int]:
    """The one or two years a year form matched (0 for a second it does not have)."""
    found = [int(g) for g in m.groups()]
    return found[0], (found[1:] or [0])[0]


def _year(question: str, years: Counter) -> tuple[FieldFilter | None, str]:
    """ "from 2024", "published after 2023", "between 2022 and 2024", "in 2024" (only a year the index has)."""
    text = next((span(*_years(m)) for form, span in _YEAR_FORMS if (m := form.search(question))), "")
    if not text and (m := _IN_YEAR.search(question)) and any(str(y) == m[1] for y in years):
        text = m[1]
    if not text:
        return None, ""
    f = parse_years(text)
    held = [y for y in years if isinstance(y, int | float) and not isinstance(y, bool)]
    if not any((f.low is None or y >= f.low) and (f.high is None or y <= f.high) for y in held):
        have = f"{min(held):g}-{max(held):g}" if held else "none"
        return None, f"no paper of this index matches {describe([f])} (its years: {have})"
    return f, ""
