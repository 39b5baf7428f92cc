"""The stand-in's tokenizer counts as the Hugging Face tokenizer folder it ships does (a WordLevel model with the
`Whitespace` pre-tokenizer, as the H200's tiny Llama has): words and runs of punctuation apart. So on prose a token is
not a whitespace word, as with a real tokenizer, and a client that counts words is off on the stand-in too."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from console.sim.datasets import chat_conversations
from console.sim.tokenizer import SimTokenizer, hf_tokenizer_json, output_token_ids, pieces

_HF = Tokenizer.from_str(json.dumps(hf_tokenizer_json()))
# Characters of every class the pre-tokenizer tells apart, and vocabulary words (ids other than <unk>).
_PART = st.sampled_from([*"abz AZ09_.,!?;:'\"-()[]\t\n", "é", "ß", "日", "\u00a0", "\u200b", " ka ", " bebe ", " ba."])
_TEXT = st.lists(_PART, max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_the_stand_in_counts_as_its_hugging_face_folder_does(text: str) -> None:
    encoded = _HF.encode(text)
    assert SimTokenizer().encode(text) == encoded.ids
    assert [p if i else "<unk>" for p, i in zip(pieces(text), encoded.ids, strict=True)] == encoded.tokens
    assert SimTokenizer().count(text) == len(encoded.ids)


def test_prose_has_more_tokens_than_words_and_generated_text_as_many() -> None:
    prose = [turn["value"] for row in chat_conversations(60, seed=1) for turn in row["conversations"]]
    words = sum(len(t.split()) for t in prose)
    tokens = sum(SimTokenizer().count(t) for t in prose)
    assert 1.08 < tokens / words < 1.30, tokens / words  # the H200's tiny tokenizer: +16.5 % on its chat file
    tok = SimTokenizer()
    ids = output_token_ids(3, 0, 200)
    assert tok.count(tok.decode(ids)) == len(ids)  # what the stand-in generates counts one token a word


def test_the_folder_the_stand_in_ships_says_the_same(tmp_path: Path) -> None:
    from console.sim.tokenizer import write_model_dir

    folder = write_model_dir(tmp_path, architecture="LlamaForCausalLM", context_length=4096, served_model_name="m")
    on_disk = Tokenizer.from_file(str(folder / "tokenizer.json"))
    text = "Honestly, my sister's cat -- (again!) -- ate 3.5 bananas."
    assert len(on_disk.encode(text).ids) == SimTokenizer().count(text) == 18  # 10 words
