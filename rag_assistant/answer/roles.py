"""What a sentence does in its abstract (background, method, result, other) and what a question asks for
(one paper, or a topic with several papers). Both steer the extractive answer: a question about one paper is
answered with that paper's method and result sentences, not its motivation; a topic question gets one line
per paper.

A sentence's role comes from a small classifier when its vector is at hand (answers read the vectors the index
stores): multinomial logistic regression over the vector, the cue phrases below, its position, and its
neighbours' cues (`role_features`), fitted on the dev labels by eval/fit_roles.py and applied with numpy from
role_model.json. Without vectors of its kind, cue-phrase rules decide (`sentence_role`): abstracts follow a strong
convention (context, gap, "we propose", "we show"). On the held-out labels (heldout2 of
eval/sentences/roles2-adjudicated.jsonl, 345 sentences) the classifier scores 0.829, the rules 0.783
(`benchmarks/sentence_roles.py [--data-dir CONF]`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

BACKGROUND, METHOD, RESULT, OTHER = "background", "method", "result", "other"

# Filler: availability, hopes, calls to action and closing slogans; never an answer's line (issue 23).
_OTHER = re.compile(
    r"https?://|github\.com"
    r"|\b(code|data|datasets?|models?|implementations?|weights|benchmarks?)\b[^.;]{0,60}?\b(is|are|will be) (made )?"
    r"(publicly |freely |openly )?(available|released|accessible)"
    r"|\bwe (release|open[- ]source|make)\b.{0,40}\b(code|available|public)"
    r"|\bwe hope\b|\b(urgent|critical|pressing) need\b|\bcall(s|ing)? (for|on)\b|\bpaves? the way\b"
    r"|\bopens? (up )?(new|promising) (avenues|directions|doors)|\bnew avenues\b"
    # closing slogans the 40-answer reading found quoted (eval/answers-reading.jsonl)
    r"|\b(findings|results|work|study|analysis|experiments)\b[^.;]{0,20}?\b(highlights?|underscores?|emphasi[sz]es?)\b"
    r"[^.;]{0,20}?\b(importance|need)\b"
    r"|\b(marks?|represents?|takes?) an? (significant|important|major|crucial|first|key) steps? "
    r"(toward|towards|forward)\b"
    # beliefs and promises with no finding of their own (the readers' labels of answer lines, issue 23)
    r"|\bwe believe\b|\bhighlights? the (potential|promise)\b|\blay(s|ing)? (the )?(foundation|groundwork)\b"
    r"|\bprovides? an opportunity to\b",
    re.I,
)
_RESULT = re.compile(
    r"\b(we (also )?(show|find|found|demonstrate|observe|prove|establish|obtain|achieve|confirm|verify|report)"
    r"|(results?|experiments?|evaluations?|analys[ie]s|simulations|benchmarks?) (show|demonstrate|indicate|suggest|"
    r"reveal|confirm|on|across|validate)"
    r"|outperform|surpass|achiev|state[- ]of[- ]the[- ]art|\bsota\b|speed-?ups?|improv(es|ing|ement)"
    r"|\d+(\.\d+)?\s*(%|x\b|×|times|fold)|empirically|extensive (experiments|evaluations)|consistently"
    r"|significantly|competitive|matches|reduces|lower (error|cost|latency)|higher (accuracy|throughput)"
    r"|theoretical(ly)? (guarantee|analysis|results?)|converge)",
    re.I,
)
_METHOD = re.compile(
    r"\b(we (first |then |further |also )?(propose|introduce|present|develop|design|formulate|leverage|adopt|construct"
    r"|build|train|derive|devise|employ|use|apply|extend|reformulate|cast|model|frame|decompose|learn|combine|"
    r"incorporate|augment|replace|generalize|analy[sz]e|study|investigate|consider|explore|provide|define|tackle|"
    r"address|revisit|identify)"
    r"|our (method|approach|framework|model|algorithm|key (idea|insight)|technique|system|pipeline|analysis)"
    r"|this (paper|work|study) (proposes|introduces|presents|develops|studies|investigates|addresses|explores)"
    r"|(in|to this end|in this paper|in this work)[, ]+we"
    r"|(which|that) (uses|leverages|combines|learns|employs|consists|relies|operates|works by))",
    re.I,
)
_BACKGROUND = re.compile(
    r"\b(recent(ly)?|however|existing|current|remains?|challeng\w*|ha(s|ve) (been|become|shown|attracted|emerged)|"
    r"widely|increasingly|growing|popular|fundamental|crucial|important|prior|previous|traditional(ly)?|"
    r"typically|often|suffers?|limited|lacks?|despite|although|while|struggle|bottleneck|emerg\w*)\b",
    re.I,
)
# this paper's own finding: a result whatever else the sentence does
_FINDING = re.compile(
    r"(\b(we|this (paper|work|study)|our (analysis|results?|work|experiments?|findings?|approach|method|theory))\b"
    r".{0,80}?\b(shows?|find|found|demonstrat\w*|observe|prove|establish|identif(y|ies)|discover|reveal\w*|"
    r"validate|confirm|characteriz\w*|sheds? light|attains?|exhibits?|derive \w* ?(necessary|sufficient|tight|"
    r"upper|lower|bounds?|conditions?)|(upper|lower) bounds?|theoretical (results?|insights?|findings?)))"
    r"|^(these|the|our|such) (results|findings|experiments|analyses)\b",
    re.I,
)
_OWN = re.compile(r"\b(we|our|us|this (paper|work|study))\b", re.I)


_CUE_NAMES = ("other", "result", "method", "background", "finding", "own", "comparative")


def _cues(sentence: str) -> dict[str, bool]:
    """Which cue phrases the sentence has: each pattern run once, for the rules and the classifier alike."""
    patterns = (_OTHER, _RESULT, _METHOD, _BACKGROUND, _FINDING, _OWN, _COMPARATIVE)
    return {name: bool(p.search(sentence)) for name, p in zip(_CUE_NAMES, patterns, strict=True)}


def sentence_role(sentence: str, position: int, n_sentences: int) -> str:
    """The role of the sentence at `position` (0-based) among `n_sentences` of its abstract, by the rules."""
    return _rule(_cues(sentence), position, n_sentences)


def _rule(cue: dict[str, bool], position: int, n_sentences: int) -> str:
    if cue["other"]:
        return OTHER
    own, result, method = cue["own"], cue["result"], cue["method"]
    late = position >= max(1, n_sentences - 2)
    if cue["finding"]:
        return RESULT
    if method and not (result and late):
        return METHOD
    if result and cue["comparative"]:  # "2.1 times faster than dense baselines": a measured claim
        return RESULT
    if result and (own or (position > 0 and not cue["background"])):
        return RESULT
    if own:
        return METHOD
    if position == 0 or cue["background"] or position < n_sentences / 3:
        return BACKGROUND
    return RESULT if late else METHOD


ROLES = (BACKGROUND, METHOD, RESULT, OTHER)
MODEL_FILE = Path(__file__).with_name("role_model.json")


def cue_features(sentence: str, position: int, n_sentences: int) -> list[float]:
    """What the rules see of a sentence, as numbers for the classifier: where it stands in its abstract, which
    cue phrases it has, and the rules' own role."""
    cue = _cues(sentence)
    rule = _rule(cue, position, n_sentences)
    return [
        position / max(1, n_sentences - 1),
        float(position == 0),
        float(position == n_sentences - 1),
        float(position >= n_sentences - 2),
        math.log1p(len(sentence.split())),
        *(float(cue[name]) for name in _CUE_NAMES),
        float(refers_back(sentence)),
        *(float(rule == role) for role in ROLES),
    ]


def role_features(sentences: list[str], vectors: np.ndarray) -> np.ndarray:
    """The classifier's input for each sentence of one abstract: its vector, its cue features, and those of the
    sentences before and after it (zeros at the ends): a role follows the abstract's order (context, gap, "we
    propose", "we show"), so a sentence's neighbours say much about it."""
    n = len(sentences)
    cues = np.array([cue_features(s, i, n) for i, s in enumerate(sentences)], dtype=np.float64).reshape(n, -1)
    pad = np.zeros((1, cues.shape[1]))
    before, after = np.vstack([pad, cues[:-1]]), np.vstack([cues[1:], pad])
    return np.hstack([np.asarray(vectors, dtype=np.float64).reshape(n, -1), cues, before, after])


def role_probabilities(
    x: np.ndarray, weights: np.ndarray, bias: np.ndarray, mean: np.ndarray, scale: np.ndarray
) -> np.ndarray:
    """Each row's probability per role (columns in ROLES order) under the fitted logistic regression."""
    z = ((x - mean) / scale) @ weights + bias
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def pick_roles(p: np.ndarray, background_at: float) -> np.ndarray:
    """Role indices: background from `background_at` on, else the likeliest role."""
    background = ROLES.index(BACKGROUND)
    return np.where(p[:, background] >= background_at, background, p.argmax(axis=1))


@dataclass(frozen=True)
class RoleModel:
    """Multinomial logistic regression over `role_features` (fitted by eval/fit_roles.py)."""

    dim: int  # the sentence vectors' dimension it was fitted on
    weights: np.ndarray  # features x roles
    bias: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    # background from this probability on, else the likeliest role: a background sentence taken for a claim is
    # what an answer would quote, so the cut is chosen by cross-validation (eval/fit_roles.py)
    background_at: float = 0.5

    def predict(self, x: np.ndarray) -> list[str]:
        p = role_probabilities(x, self.weights, self.bias, self.mean, self.scale)
        return [ROLES[i] for i in pick_roles(p, self.background_at)]

    def roles(self, sentences: list[str], vectors: np.ndarray) -> list[str]:
        return self.predict(role_features(sentences, vectors))


@lru_cache(maxsize=1)
def role_model() -> RoleModel | None:
    """The fitted classifier, read once per process (a few hundred kB of JSON); None without the file."""
    if not MODEL_FILE.exists():
        return None
    raw = json.loads(MODEL_FILE.read_text(encoding="utf-8"))
    return RoleModel(
        raw["dim"],
        *(np.array(raw[key], dtype=np.float64) for key in ("weights", "bias", "mean", "scale")),
        raw.get("background_at", 0.5),
    )


def abstract_roles(sentences: list[str], vectors: np.ndarray | None = None) -> list[str]:
    """Each sentence's role. With the sentences' vectors (the index's, n x dim) the fitted classifier decides; the
    cue-phrase rules alone without them, or when the vectors are not the kind it was fitted on (another dim)."""
    model = role_model()
    if model is not None and vectors is not None and np.shape(vectors) == (len(sentences), model.dim) and sentences:
        guessed = model.roles(sentences, vectors)
        return [_overruled(s, i, role) for i, (s, role) in enumerate(zip(sentences, guessed, strict=True))]
    return [sentence_role(s, i, len(sentences)) for i, s in enumerate(sentences)]


def _overruled(sentence: str, position: int, role: str) -> str:
    """Where cue phrases are surer than the classifier: filler (never a line, issue 23; the classifier saw few),
    and an opening sentence that is not the paper's own ("X is a fundamental task ..."): background for all 235
    such training labels."""
    if _OTHER.search(sentence):
        return OTHER
    return BACKGROUND if position == 0 and not _OWN.search(sentence) else role


# A sentence whose opening refers back to something only an earlier sentence names ("To alleviate this, ...",
# "These systems ...", "For instance, ...", "we bridge this gap"): quoted alone, the reader cannot tell what it
# means. Tuned on the training labels (benchmarks/sentence_roles.py --split dev2; the first round's files).
# "this paper/work/study" names the paper itself and refers to nothing before.
_SELF = r"(?! (?:paper|work|study|article|position paper|thesis|report)\b)"
_ANAPHOR = rf"(?:this{_SELF}|these|those|such|it|its|they|their|them|above|aforementioned|the former|the latter)"
_REFERS_BACK = re.compile(
    r"^(?:"
    r"to (?:address|alleviate|tackle|overcome|mitigate|solve|remedy|fill|bridge|close|meet|achieve|resolve|handle"
    rf"|fix|answer|circumvent|counter|combat|avoid)\b[^,]{{0,40}}?\b{_ANAPHOR}\b"
    r"|(?:building|based|drawing|relying|inspired|motivated|guided|grounded) (?:on|by|upon)\b"
    rf"[^,]{{0,30}}?\b{_ANAPHOR}\b"
    rf"|(?:given|despite|with|through|in|under|from|beyond|unlike|within|against|for|by|using|via) {_ANAPHOR}\b"
    r"|(?:consequently|therefore|thus|hence|moreover|furthermore|additionally|in addition|in particular|specifically"
    r"|similarly|likewise|nevertheless|nonetheless|however|instead|as a result|as such|in turn|accordingly|finally"
    r"|then|next|besides|first|second|third|lastly)\b[^.]{0,60}?\b"
    rf"(?:{_ANAPHOR}|the (?:\w+ ){{0,2}}(?:method|model|approach|framework|estimator|problem|findings|results?"
    r"|analysis|algorithm|task|issue|gap|challenge|limitation|strategy|paradigm|setting|process|module|phenomenon"
    r"|question|stage|step|phase))\b"
    rf"|{_ANAPHOR}\b"
    r"|the (?:\w+[- ]){0,2}(?:findings|analysis|results|problem|issue|gap|challenge|limitation|question|phenomenon)\b"
    r"|\w+ (?:of|in|among|on) (?:these|those|such|them|this)\b"
    r"|(?:in this (?:paper|work|study),? )?(?:we|our \w+|this (?:paper|work|study))\b[^,.;]{0,60}?"
    rf"\b(?:this{_SELF}|these|those|such|its|their|they|them)\b"
    r"|(?:to this end|in doing so|to do so|for (?:instance|example)|conversely|collectively|in contrast"
    r"|importantly|in response|in the (?:first|second|third|final|next|last) (?:stage|step|phase))\b"
    # "Training models on this sensitive data ...": the referent inside the subject's own phrase (dev labels: 11 of
    # the 11 sentences this adds are dangling)
    r"|[^,.;:]{0,50}?\b(?:with|using|of|on|from|by|for|in|under|via|to) (?:this|these|those|such) "
    r"(?!paper\b|work\b|study\b|article\b|position\b)\w+"
    r"|[^,]{0,40}\b(?:this|these|those) (?!paper\b|work\b|study\b)\w+ (?:\w+ )?(?:is|are|was|were|has|have|can"
    r"|does|do|leads?|enables?|allows?|makes?|provides?|yields?|overlooks?|remains?|suffers?)\b"
    r")",
    re.I,
)


def refers_back(sentence: str) -> bool:
    """True when the sentence's opening refers back to an earlier sentence (see _REFERS_BACK)."""
    return bool(_REFERS_BACK.search(sentence.lstrip("*_ ")))


# Comparison questions ("how does it compare to baselines?") want the sentence that compares.
_COMPARISON_QUESTION = re.compile(
    r"\b(compare[sd]?|comparison|versus|vs\.?|baselines?|better|worse|outperform\w*|against|relative to|than)\b", re.I
)
_COMPARATIVE = re.compile(
    r"\b(outperform\w*|surpass\w*|compared (with|to)|than|over (the )?(strong |existing |prior )?baselines?"
    r"|baselines?|relative to|versus|vs\.?|state[- ]of[- ]the[- ]art|improv\w* (over|on|upon))\b",
    re.I,
)


def asks_to_compare(question: str) -> bool:
    return bool(_COMPARISON_QUESTION.search(question))


def compares(sentence: str) -> bool:
    return bool(_COMPARATIVE.search(sentence))


_TOPIC = re.compile(
    r"^\s*(which|what|list|name|find|show( me)?|are there|is there any|compare|survey|give me)\b[^?]{0,80}?"
    r"\b(papers|works|studies|approaches|methods|techniques|algorithms|systems|models|frameworks|"
    r"articles|publications|ways|strategies|solutions|benchmarks|datasets)\b"
    r"|^\s*how (are|have)\b[^?]{0,60}\b(being|been)\b",
    re.I,
)
_SINGLE = re.compile(
    r"\b(the|a|one|this|that|which) (paper|work|study|article|method|approach|model|framework)\b"
    r"(?! (that|which) (are|propose|study))",
    re.I,
)


def asks_for_topic(question: str) -> bool | None:
    """True for a question after several papers ("Which papers ...", "What approaches ..."), False for one
    about a single paper ("the paper that ...", "How does X work?"), None when the words do not say."""
    if _TOPIC.search(question):
        return not re.search(r"\b(does|did)\b", question, re.I)  # "what methods does X use" is about X
    if _SINGLE.search(question) or re.match(r"^\s*(how|why|what) (does|did|is|was)\b", question, re.I):
        return False
    return None
