"""What a request is about, read from its prompt, and how much that moves an EAGLE-style draft's acceptance.

Real drafts accept more on some traffic than on other: the EAGLE-3 heads of Llama accept ×1.26-1.31 more tokens a round
on code (HumanEval) than on chat (MT-bench) and ×1.14-1.29 more on math (GSM8K); EAGLE on Spec-Bench gains less on
summarisation of a given article (CNN/DM) and least on translation (WMT14 German → English). The stand-in draws its
output at random, so it cannot see what it is asked to continue; it reads the prompt instead and sorts it into one of
five tasks (`classify_prompt`), from features a real prompt of that task has:

* code: lines shaped like source code: indentation, lines that end in ``:``, ``{``, ``}``, ``;``, ``,`` or ``(``, or
  that start a block (``def``, ``class``, ``return``, ``import``, ``if``, ``for``, ``function``, ``#include``,
  ``}`` ...), and a density of brackets and operators that prose does not reach;
* translation: an instruction to translate (at the start or the end of the prompt) *and* a second language in it: a
  non-Latin script, or the function words and accented letters of a European language other than English. A
  request to translate an English sentence into French is chat here: its text is English (the bundled chat prompts
  have one; they stay as calibrated);
* summarisation: an instruction to summarise (``summarise``, ``summarize``, ``TL;DR``, ``write a summary`` ...) at the
  start or the end, and a given text of at least SUMMARY_MIN_WORDS words to summarise ("summarise the plot of
  Moby-Dick" is chat: there is no given text);
* math: an explicit expression or equation (``3 + 4``, ``x^2``, ``y = 2``, LaTeX), or a math question (``solve``,
  ``calculate``, ``how many``, ``how much`` ...) about numbers in the text;
* chat: everything else (open questions, prose, random words and token ids: the seeds' calibration traffic).

It reads a bounded prefix (MAX_CONTENT_CHARS characters) and the first and last INSTRUCTION_CHARS characters, so it
costs the same on any prompt (it runs once per request in the stand-in).

The published ratios are turned into a scale of the *odds* of a rejection (1 − p) / p per task (TaskScales), fitted
at the published setting (tests/sim/test_content_acceptance.py re-derives each ratio from these constants). Scaling the
odds rather than the rejection probability itself keeps a weak draft's acceptance a probability: Spec-Bench's
translation asks for rejections ×2.2 on a draft that accepts 0.7 per position, which would leave a draft that
accepts 0.16 nothing at all; where rejections are rare the two are the same.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import NamedTuple

MAX_CONTENT_CHARS = 8192  # the prefix whose features are read
INSTRUCTION_CHARS = 600  # an instruction to translate or to summarise is looked for this close to either end
SUMMARY_MIN_WORDS = 120  # a given text shorter than this is a question about something, not a text to summarise
MIN_CODE_LINES = 3
MAX_CODE_LINES = 120  # the lines whose shapes are read
CODE_SYMBOL_DENSITY = 0.05  # brackets, operators, quotes and underscores per visible character


class Task(StrEnum):
    CHAT = "chat"
    CODE = "code"
    MATH = "math"
    SUMMARISATION = "summarisation"
    TRANSLATION = "translation"


class TaskScales(NamedTuple):
    """What a draft's odds of a rejection are multiplied by on each task (chat: 1, the calibration's)."""

    code: float
    math: float
    summarisation: float
    translation: float

    def for_task(self, task: Task) -> float:
        return 1.0 if task is Task.CHAT else float(getattr(self, task.value))


# EAGLE-style drafts, fitted to the published ratios (docs/demo.md, "The stand-in's acceptance by task"): code and math
# to the EAGLE-3 Llama heads' accept lengths (nebius/EAGLE3-Llama-3.3-70B-Instruct's model card: yuhuili 8B, RedHatAI
# 70B, nebius 70B at temperature 1, 7 draft tokens; the 8B and RedHat rows give the same scale, the nebius head gains
# more), summarisation and translation to EAGLE's speedups on Spec-Bench (hemingkx/Spec-Bench Leaderboard.md, A100,
# Vicuna 7B / 13B / 33B: one tree and one GPU, so the speedup ratio stands for the accept-length ratio).
EAGLE_TASK_SCALES = TaskScales(code=0.658, math=0.714, summarisation=1.33, translation=2.2)
# A draft whose acceptance does not depend on the task: AngelSlim's Qwen3 EAGLE3 heads accept within ±0.05 of one
# another on GSM8K, Alpaca, HumanEval and MT-bench (1.7B to 32B and 30B-A3B).
NO_TASK_EFFECT = TaskScales(code=1.0, math=1.0, summarisation=1.0, translation=1.0)


def odds_scaled_rejection(reject: float, scale: float) -> float:
    """A rejection probability whose odds reject / (1 − reject) are multiplied by `scale`."""
    if scale == 1.0 or reject <= 0.0:
        return reject
    if reject >= 1.0:
        return 1.0
    odds = reject / (1.0 - reject) * scale
    return odds / (1.0 + odds)


# ---- features -------------------------------------------------------------------------------------------------------

_CODE_SYMBOLS = b"{}[]()<>=;_+/%&|!\\\"'`#@$^~"  # not "*": a box of asterisks around prose is not code
_CODE_LINE_END = (":", "{", "}", ";", ",", "(", "[", ")", "]", "\\", "=>", "->")
_CODE_LINE_START = re.compile(
    r"(def|class|return|import|from|if|elif|else|for|while|try|except|finally|with|raise|yield|assert|async|await"
    r"|function|const|let|var|public|private|protected|static|void|int|fn|func|impl|struct|enum|package|use|pub"
    r"|switch|case|break|continue|#include|#define|#!|//|/\*|\*|@\w+|[\]}\)])(\W|$)"
)
_TRAILING_COMMENT = re.compile(r"\s+(#|//)[^'\"]*$")  # a comment after code: the code's end is what counts
_STATEMENT = re.compile(r"[\w.\[\]'\"]+\s*([-+*/|&]?=[^=]|\()")  # an assignment or a call
_TRANSLATE_HINTS = ("transl", "übersetz", "tradu", "vertaal", "перев", "翻", "번역")
_TRANSLATE = re.compile(
    r"\b(translate|translating|translation\s*:|into (english|french|german|spanish|italian|portuguese|dutch|russian"
    r"|chinese|japanese|korean|arabic)\s*:|übersetze|übersetzen|traduis|traduire|traduce|traducir|tradurre|traduza"
    r"|vertaal|переведи|перевести)\b|翻译|翻譯|翻訳|번역"
)
_SUMMARISE_HINTS = ("summ", "tl", "synops", "abstract")
_SUMMARISE = re.compile(
    r"\b(summari[sz]e|summari[sz]ing|tl;?\s?dr|sum (it |this |them )?up|(write|give|provide|produce|generate|create)"
    r"\b[^.?!\n]{0,40}\b(summary|synopsis|abstract)|(summary|synopsis)\s*:)"
)
# A question about numbers, as GSM8K asks them (whole words or phrases, lower case).
_MATH_QUESTIONS = (
    "solve", "calculate", "evaluate the", "simplify the", "how many", "how much", "how long", "how far", "how old",
    "what is the value", "what is the sum", "what is the product", "what is the probability", "what is the remainder",
    "what is the area", "find the value", "the derivative of", "the integral of", "equation", "equations", "prove that",
)  # fmt: skip
_EXPRESSION_CHARS = "+*/×÷^=<>\\$"
_MATH_EXPRESSIONS = (
    re.compile(r"\d ?[+*/×÷^=<>] ?\(?-?\d|\d - \d"),  # 3 + 4, 2*7, 10/5, 1 = 1 (not a date's 2024-03-15)
    re.compile(r"(?:\^|\*\*|=) ?-?\d"),  # x^2, x**2, y = 3: after a one-letter name (_after_a_variable)
    re.compile(r"\\(frac|sqrt|int|sum|cdot|times|pi|le|ge)\b|\$[^$\n]{1,80}\$"),  # LaTeX
)
_DIGIT = re.compile(r"\d")
_PUNCTUATION = ".,;:!?\"'()[]«»„“”"
_OTHER_SCRIPT = re.compile(
    r"[\u0370-\u03ff\u0400-\u04ff\u0590-\u05ff\u0600-\u06ff\u0900-\u097f\u0e00-\u0e7f"
    r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]"
)
_ACCENTED = re.compile(r"[àâäáãåçéèêëíìîïñóòôöõúùûüßæœø]", re.IGNORECASE)
# Function words of German, French, Spanish, Italian, Portuguese and Dutch that are not English words.
_FOREIGN_WORDS = frozenset(
    {
        "und", "ist", "nicht", "der", "das", "ein", "eine", "einen", "mit", "auf", "für", "sich", "auch", "wird",
        "werden", "nach", "bei", "oder", "aber", "wie", "noch", "über", "wir", "ich", "sie", "sind", "wurde", "zum",
        "zur", "vom", "dass", "les", "des", "est", "une", "dans", "pour", "pas", "qui", "sur", "avec", "sont", "nous",
        "vous", "elle", "du", "au", "aux", "ces", "cette", "mais", "très", "el", "los", "las", "del", "una", "por",
        "para", "con", "como", "más", "pero", "fue", "está", "muy", "también", "il", "della", "delle", "che", "sono",
        "degli", "nel", "alla", "anche", "questo", "uma", "não", "pelo", "pela", "então", "het", "een", "niet",
        "zijn", "wordt", "voor", "maar", "ook", "naar", "bij", "dat",
    }
)  # fmt: skip


def _symbol_density(head: str) -> float:
    raw = head.encode("ascii", "ignore")
    visible = len(raw.translate(None, b" \t\n\r\f\v"))
    return (len(raw) - len(raw.translate(None, _CODE_SYMBOLS))) / max(1, visible)


def _is_code(head: str) -> bool:
    if _symbol_density(head) < CODE_SYMBOL_DENSITY:  # prose: 0.01-0.03; source code: 0.08 and up
        return False
    lines = [line for line in head.splitlines() if line.strip()][:MAX_CODE_LINES]
    if len(lines) < MIN_CODE_LINES:
        return False
    shaped = 0
    indented = 0
    for line in lines:
        stripped = line.strip()
        if line[0] in " \t":
            indented += 1
        code = stripped
        if "#" in code or "//" in code:
            code = _TRAILING_COMMENT.sub("", code) or code
        if code.endswith(_CODE_LINE_END) or _CODE_LINE_START.match(code) or _STATEMENT.match(code):
            shaped += 1
    shaped_share, indented_share = shaped / len(lines), indented / len(lines)
    return shaped_share >= 0.3 and (indented_share >= 0.2 or shaped_share >= 0.5)


def _second_language(head: str) -> bool:
    if not head.isascii() and (len(_OTHER_SCRIPT.findall(head)) >= 8 or len(_ACCENTED.findall(head)) >= 4):
        return True
    return sum(w.strip(_PUNCTUATION).lower() in _FOREIGN_WORDS for w in head.split()) >= 3


def _has_phrase(lower: str, phrases: tuple[str, ...]) -> bool:
    """Whether one of `phrases` occurs in `lower` as whole words (str.find: cheaper than a regex alternation)."""
    for phrase in phrases:
        at = lower.find(phrase)
        while at >= 0:
            end = at + len(phrase)
            if (at == 0 or not lower[at - 1].isalnum()) and (end == len(lower) or not lower[end].isalnum()):
                return True
            at = lower.find(phrase, at + 1)
    return False


def _after_a_variable(head: str, at: int) -> bool:
    before = head[max(0, at - 3) : at].rstrip(" ")
    return before[-1:].isalpha() and (len(before) < 2 or not before[-2].isalnum())


def _has_hint(lower: str, hints: tuple[str, ...]) -> bool:
    """Whether one of `hints` occurs in `lower` at all (a cheap test before a regex)."""
    return any(hint in lower for hint in hints)


def _is_math(head: str, lower: str) -> bool:
    expressions = 0
    if any(c in head for c in _EXPRESSION_CHARS):
        numeric, variable, latex = _MATH_EXPRESSIONS
        expressions = len(numeric.findall(head)) + len(latex.findall(head))
        expressions += sum(_after_a_variable(head, m.start()) for m in variable.finditer(head))
        if expressions >= 2:
            return True
    return _has_phrase(lower, _MATH_QUESTIONS) and (expressions > 0 or _DIGIT.search(head) is not None)


def classify_prompt(text: str) -> Task:
    """The task a text prompt asks for (module doc); a bounded amount of work whatever its length."""
    head = text[:MAX_CONTENT_CHARS]
    if _is_code(head):
        return Task.CODE
    if len(text) <= 2 * INSTRUCTION_CHARS:
        ends = text.lower()
    else:
        ends = (text[:INSTRUCTION_CHARS] + "\n" + text[-INSTRUCTION_CHARS:]).lower()
    if _has_hint(ends, _TRANSLATE_HINTS) and _TRANSLATE.search(ends) and _second_language(head):
        return Task.TRANSLATION
    if _has_hint(ends, _SUMMARISE_HINTS) and _SUMMARISE.search(ends) and len(head.split()) >= SUMMARY_MIN_WORDS:
        return Task.SUMMARISATION
    if _is_math(head, head.lower()):
        return Task.MATH
    return Task.CHAT
