"""How a dataset's lengths get counted (console.core.bench.tokens), with counters made here: the first way that
answers counts, a way that cannot (no /tokenize, no tokenizer on the host) hands over to the next with its reason,
none at all leaves words and says why; the counts are kept in the workspace by (model, sha256, sample, seed), so a
second run tokenizes nothing, and another seed or model counts again."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from console.bench.datasets import sample_dataset
from console.core.bench.tokens import AsyncCounter, TokenizerUnavailable, counted_sample, unit_tokenizer
from console.sim.datasets import chat_conversations
from console.workspace import Workspace


class Tokenizer:
    def __init__(self) -> None:
        self.texts = 0

    async def __call__(self, texts: Sequence[str]) -> list[int]:
        self.texts += len(texts)
        return [1 + len(re.findall(r"\w+|[^\w\s]+", t)) for t in texts]


def way(counter: AsyncCounter, model: str = "/models/tiny"):  # type: ignore[no-untyped-def]
    async def make() -> tuple[AsyncCounter, str, str]:
        return counter, "the test's tokenizer", model

    return make


def unavailable(why: str):  # type: ignore[no-untyped-def]
    async def make() -> tuple[AsyncCounter, str, str]:
        raise TokenizerUnavailable(why)

    return make


def chat_file(tmp_path: Path) -> Path:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(chat_conversations(80, seed=4)))
    return path


async def test_a_second_run_reads_the_counts_back_and_tokenizes_nothing(tmp_path: Path) -> None:
    path, workspace, tokenizer = chat_file(tmp_path), Workspace(tmp_path / "ws"), Tokenizer()
    words = sample_dataset(path, size=30, seed=1)
    first = await counted_sample(words, [way(tokenizer)], workspace)
    counted = tokenizer.texts
    second = await counted_sample(words, [way(tokenizer)], workspace)
    assert counted >= 60 and tokenizer.texts == counted  # nothing counted the second time
    assert not first.cached and second.cached and second.unit == first.unit == "tokens"
    assert second.sample.requests == first.sample.requests
    assert [r.output_len for r in first.sample.requests] != [r.output_len for r in words.requests]
    assert "read back" in second.text()
    await counted_sample(sample_dataset(path, size=30, seed=2), [way(tokenizer)], workspace)
    assert tokenizer.texts > counted  # another seed: counted again
    again = tokenizer.texts
    await counted_sample(words, [way(tokenizer, model="/models/other")], workspace)
    assert tokenizer.texts > again  # another model: counted again


async def test_the_first_way_that_answers_counts_and_none_leaves_words_with_why(tmp_path: Path) -> None:
    words = sample_dataset(chat_file(tmp_path), size=10, seed=1)
    server = unavailable("the server has no /tokenize (SGLang before 0.5.4)")
    host = Tokenizer()
    got = await counted_sample(words, [server, way(host)], None)
    assert got.unit == "tokens" and host.texts > 0

    async def breaks(texts: Sequence[str]) -> list[int]:
        raise TokenizerUnavailable("the host's tokenizer could not run: gone")

    none = await counted_sample(words, [server, way(breaks)], None)
    assert none.unit == "words" and none.sample.requests == words.requests
    assert none.counter == (
        "words (the server has no /tokenize (SGLang before 0.5.4); the host's tokenizer could not run: gone)"
    )
    assert none.sample.describe()["length_unit"] == "words"


def test_the_unit_names_its_python_and_tokenizer() -> None:
    unit = (
        "[Service]\nEnvironment=HF_HOME=/srv/hf HF_TOKEN=secret\n"
        "ExecStart=/opt/venv/bin/python -m sglang.launch_server --model-path Qwen/Qwen3 --tokenizer-path=/srv/tok "
        "--trust-remote-code --port 30000\n"
    )
    assert unit_tokenizer(unit) == ("/opt/venv/bin/python", "/srv/tok", True, {"HF_HOME": "/srv/hf"})
    plain = "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --model /m/tiny\n"
    assert unit_tokenizer(plain) == ("/usr/bin/python3", "/m/tiny", False, {})
    assert unit_tokenizer("[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --port 1\n") is None
