"""The stand-in's /tokenize and /detokenize, as SGLang serves them (serving_tokenize.py, 0.5.4 on; the sources read
are named in docs/traffic.md): a prompt or a list of prompts -> tokens, count, max_model_len; `messages` from 0.5.12 on
only; JSON only; behind --api-key like every route but /health and /metrics."""

from __future__ import annotations

import httpx
import pytest

from console.sim.tokenizer import SimTokenizer
from tests.support.simproc import FAST, running_sim

pytestmark = pytest.mark.system  # the stand-in as a process (tests/tiers.py)

TEXT = "Hello, world! Tell me a story."


def test_tokenize_counts_a_prompt_and_a_batch_as_sglang_answers() -> None:
    with running_sim([*FAST, "--sim-sglang-version", "0.5.6", "--context-length", "4096"]) as sim:
        one = httpx.post(sim.url + "/tokenize", json={"prompt": TEXT}).json()
        assert one == {"tokens": SimTokenizer().encode(TEXT), "count": 9, "max_model_len": 4096}
        batch = httpx.post(sim.url + "/v1/tokenize", json={"prompt": [TEXT, "a b"], "model": "x"}).json()
        assert batch["count"] == [9, 2] and len(batch["tokens"]) == 2
        refused = httpx.post(sim.url + "/tokenize", json={"messages": [{"role": "user", "content": "hi"}]})
        assert refused.status_code == 400 and refused.json()["object"] == "error"  # 0.5.6: prompt only
        wrong_type = httpx.post(
            sim.url + "/tokenize", content=b'{"prompt": "a"}', headers={"Content-Type": "text/plain"}
        )
        assert wrong_type.status_code == 400 and "application/json" in wrong_type.json()["message"]
        back = httpx.post(sim.url + "/detokenize", json={"tokens": [2, 3, 4]}).json()
        assert back == {"text": SimTokenizer().decode([2, 3, 4])}


def test_from_0_5_12_tokenize_takes_chat_messages_and_the_key_guards_it() -> None:
    args = [*FAST, "--sim-sglang-version", "0.5.17", "--api-key", "k3y"]
    with running_sim(args) as sim:
        key = {"Authorization": "Bearer k3y"}
        assert httpx.post(sim.url + "/tokenize", json={"prompt": TEXT}).status_code == 401
        chat = httpx.post(sim.url + "/tokenize", json={"messages": [{"role": "user", "content": TEXT}]}, headers=key)
        assert chat.status_code == 200 and chat.json()["count"] == 1 + 9  # the template's role word, then the text
        both = httpx.post(sim.url + "/tokenize", json={"prompt": "a", "messages": []}, headers=key)
        assert both.status_code == 400 and "Exactly one of 'prompt' or 'messages'" in both.json()["message"]
