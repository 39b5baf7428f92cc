"""The simulator's own deterministic tokenizer, and the Hugging Face-format folder that matches it.

Tokens are pronounceable made-up words separated by single spaces. Every word is a fixed-width
sequence of consonant+vowel syllables, so distinct id sequences give distinct texts and
`decode(encode(text)) == text` for any text built from vocabulary words. The same vocabulary is
written as a WordLevel `tokenizer.json`, so clients that load a tokenizer with transformers'
AutoTokenizer (SGLang's bench_serving) count exactly the tokens the simulator counts.

A text is split as Hugging Face's `Whitespace` pre-tokenizer splits it (`pieces`): runs of word characters, and
runs of other non-space characters (punctuation) as tokens of their own. That is how the tiny Llama's WordLevel
tokenizer on the H200 counts (scripts/real_sglang/build_tiny.py), so on prose a token is not a whitespace word: the
repo's open-chat set has about 15 % more tokens than words, as real tokenizers have more tokens than words. A
client that counts words is then visibly off on the stand-in too (docs/traffic.md). No special token is added
(the tiny Llama adds a BOS; a real server's count includes it): the stand-in's prompts count what they say.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

UNK_TOKEN = "<unk>"
EOS_TOKEN = "<eos>"
UNK_ID = 0
EOS_ID = 1
FIRST_WORD_ID = 2
VOCAB_SIZE = 32000

_CONSONANTS = "bdfgklmnprstvz"
# Hugging Face tokenizers' `Whitespace` pre-tokenizer: \w+|[^\w\s]+ (tokenizers/src/pre_tokenizers/whitespace.rs).
_PIECES = re.compile(r"\w+|[^\w\s]+")


def pieces(text: str) -> list[str]:
    """The text's tokens as strings: word runs and punctuation runs, as the `Whitespace` pre-tokenizer splits."""
    return _PIECES.findall(text)


_VOWELS = "aeiou"


def _syllables() -> list[str]:
    return [c + v for c in _CONSONANTS for v in _VOWELS]


@lru_cache(maxsize=1)
def vocabulary() -> tuple[str, ...]:
    """id -> token string, ids 0 and 1 being <unk> and <eos>."""
    syl = _syllables()
    words: list[str] = []
    for length in (1, 2, 3):
        frontier = [""]
        for _ in range(length):
            frontier = [w + s for w in frontier for s in syl]
        for w in frontier:
            words.append(w)
            if len(words) >= VOCAB_SIZE - FIRST_WORD_ID:
                return (UNK_TOKEN, EOS_TOKEN, *words)
    raise AssertionError("syllable table too small for VOCAB_SIZE")  # pragma: no cover


@lru_cache(maxsize=1)
def _index() -> dict[str, int]:
    return {tok: i for i, tok in enumerate(vocabulary())}


class SimTokenizer:
    """Word-level tokenizer over `vocabulary()` (`pieces` of the text: words and punctuation runs); unknown pieces
    map to <unk>."""

    vocab_size = VOCAB_SIZE
    eos_token_id = EOS_ID

    def __init__(self) -> None:
        self._vocab = vocabulary()
        self._ids = _index()

    def encode(self, text: str) -> list[int]:
        ids = self._ids
        return [ids.get(piece, UNK_ID) for piece in pieces(text)]

    def count(self, text: str) -> int:
        return len(pieces(text))

    def decode(self, ids: Iterable[int]) -> str:
        vocab = self._vocab
        return " ".join(vocab[i] if 0 <= i < VOCAB_SIZE else UNK_TOKEN for i in ids)

    def token_text(self, token_id: int, first: bool) -> str:
        """The text one more token adds to a decoded sequence (a leading space unless it is the first)."""
        word = self._vocab[token_id] if 0 <= token_id < VOCAB_SIZE else UNK_TOKEN
        return word if first else " " + word


def output_token_ids(seed: int, start: int, count: int) -> list[int]:
    """Deterministic generated ids for one request: a cheap LCG walk over the word ids (never <unk>/<eos>)."""
    span = VOCAB_SIZE - FIRST_WORD_ID
    out = []
    x = (seed * 2654435761 + start * 40503) & 0xFFFFFFFF
    for _ in range(count):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append(FIRST_WORD_ID + (x >> 8) % span)
    return out


def hf_tokenizer_json() -> dict[str, Any]:
    vocab = vocabulary()
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": tok,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i, tok in ((UNK_ID, UNK_TOKEN), (EOS_ID, EOS_TOKEN))
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": {tok: i for i, tok in enumerate(vocab)}, "unk_token": UNK_TOKEN},
    }


def write_model_dir(
    path: Path,
    *,
    architecture: str,
    context_length: int,
    served_model_name: str,
) -> Path:
    """A model folder with config.json and an HF tokenizer matching SimTokenizer (idempotent)."""
    path.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": [architecture],
        "model_type": "opsconsole_sim",
        "max_position_embeddings": context_length,
        "vocab_size": VOCAB_SIZE,
        "eos_token_id": EOS_ID,
        "_name_or_path": served_model_name,
    }
    tokenizer_config = {
        # Named explicitly so AutoTokenizer does not need to know the (made-up) model_type.
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": UNK_TOKEN,
        "eos_token": EOS_TOKEN,
        "model_max_length": context_length,
        "clean_up_tokenization_spaces": False,
        "chat_template": "{% for m in messages %}{{ m['role'] }} {{ m['content'] }} {% endfor %}",
    }
    files = {
        "config.json": config,
        "tokenizer_config.json": tokenizer_config,
        "special_tokens_map.json": {"unk_token": UNK_TOKEN, "eos_token": EOS_TOKEN},
        "tokenizer.json": hf_tokenizer_json(),
    }
    for name, content in files.items():
        target = path / name
        text = json.dumps(content, indent=None if name == "tokenizer.json" else 2)
        if not target.exists() or target.read_text() != text:
            tmp = target.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(target)
    return path


def chat_prompt_text(messages: Sequence[dict[str, Any]]) -> str:
    """The text a chat request's messages are templated to (role word + content), for prompt token counts."""
    parts: list[str] = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(f"{m.get('role', 'user')} {content or ''}")
    return " ".join(parts)
