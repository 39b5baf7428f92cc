"""The stand-in's acceptance depends on what a request asks for (console.sim.content, console.sim.perf "the task"): its
prompt is sorted into code, math, chat, summarisation or translation, and an EAGLE-style draft's odds of a rejection are
scaled by the task's factor, fitted to the published per-task tables (docs/demo.md). The synthetic workloads are chat
(their calibration holds); the repo's code set is code, and on Kimi's EAGLE3 chain it accepts more than the chat set,
within the published code ÷ chat range, in the model and through a real stand-in process.

Real text that no one here wrote (Python's standard library, the licenses a Debian system ships):
tests/sim/test_real_text_acceptance.py."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from console.bench.client import BenchClient
from console.bench.datasets import sample_dataset
from console.bench.engine import BenchEngine, SweepConfig
from console.bench.workloads import WorkloadSpec, build_requests, chat_prompts
from console.sim.content import (
    EAGLE_TASK_SCALES,
    NO_TASK_EFFECT,
    Task,
    classify_prompt,
    odds_scaled_rejection,
)
from console.sim.datasets import chat_conversations, code_prompts, write_datasets
from console.sim.engine import simulate_closed_loop
from console.sim.http_api import IDS_TASK
from console.sim.perf import PerfModel
from console.sim.profiles import PROFILES, get_profile
from tests.support.simproc import SimProcess

KIMI = get_profile("kimi-k2.5-int4-8x-rtxpro6000-pcie")
QWEN = get_profile("qwen3.5-122b-fp8-4x-rtxpro6000")
NO_SPEC: dict[str, object] = {}
EAGLE3_V2 = {
    "speculative_algorithm": "EAGLE3",
    "speculative_num_steps": 2,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 3,
    "disable_overlap_schedule": False,
}
# The published code ÷ chat accept-length ratios: 1.0 (AngelSlim's Qwen3 EAGLE3 heads) to 1.31 (the EAGLE-3 Llama heads)
PUBLISHED_CODE_OVER_CHAT = (1.0, 1.31)

ARTICLE = (
    "The harbour authority met on Tuesday evening to discuss the proposed changes to the ferry timetable. Residents "
    "of the two islands attended and raised concerns about longer waits, the loss of the last evening crossing and "
    "the cost of season tickets. The authority's operations manager explained that the changes were needed because "
    "passenger numbers had fallen for three winters in a row and the older of the two boats needed a long refit. "
    "Several members argued that cutting crossings would push islanders to move to the mainland, emptying the "
    "village schools, while others wanted the regional government asked for money before anything was cut. After "
    "three hours the authority voted to postpone the decision until a full consultation had been held, with a "
    "report due in the spring. Shop owners on both islands welcomed the delay, saying that many of their staff "
    "rely on the first and last boats. The operator said the current timetable would run until the consultation "
    "ends, but warned that fares may have to rise next year."
)
EXAMPLES = {
    Task.CODE: [
        'def mean_gap(values: list[float]) -> float:\n    """The mean distance between neighbours.\n\n'
        '    >>> mean_gap([1.0, 4.0, 6.0])\n    2.5\n    """\n',
        "Why does this not compile?\n\n```rust\nfn main() {\n    let v = vec![1, 2, 3];\n    let first = &v[0];\n"
        '    v.push(4);\n    println!("{}", first);\n}\n```',
        "#include <stdio.h>\n\nint main(void) {\n    for (int i = 0; i < 3; i++) {\n"
        '        printf("%d\\n", i);\n    }\n    return 0;\n}\n',
    ],
    Task.MATH: [
        "A baker sells 36 loaves in the morning and a third as many in the afternoon. How many loaves does she sell?",
        "Solve for x: 4x - 7 = 21.",
        "Let $g(t) = t^2 - 5t + 6$. Find all real $t$ with $g(t) = 0$.",
        "Compute 18 * 24 - 60 / 4.",
    ],
    Task.TRANSLATION: [
        "Translate German to English: Der Stadtrat hat am Mittwoch beschlossen, dass die neuen Regeln für den Ausbau "
        "der Radwege ab dem nächsten Jahr gelten sollen, obwohl einige Bezirke noch Bedenken haben.",
        "Translate the following into English: Le conseil a annoncé mercredi que les nouvelles règles entreront en "
        "vigueur dès l'année prochaine, mais plusieurs quartiers ont exprimé des réserves.",
        "Translate to English: Вчера мы ходили в театр, и спектакль был очень интересным.",
        "请把下面这段话翻译成英文：今天天气很好，我们一起去公园散步吧。",
    ],
    Task.SUMMARISATION: [
        ARTICLE + "\n\nSummarize the article above in three sentences.",
        "Write a short summary of the following news story.\n\n" + ARTICLE,
        ARTICLE + "\nTL;DR:",
    ],
    Task.CHAT: [
        ARTICLE,  # a long text with no instruction is prose
        "Translate into French: 'The meeting has moved to Thursday afternoon.'",  # English only: no second language
        "Summarize the plot of Hamlet in five sentences.",  # no given text to summarise
        "Give me a regular expression that matches dates like 2024-03-15.",  # a date is not arithmetic
        "Scale this recipe from 4 to 6 people: 300 g rice, 2 onions, 1 litre of stock.",
        "What is the time complexity of building a binary heap from n elements?",
        "Write a Python function that merges two sorted lists.",  # asks for code, shows none
    ],
}


@pytest.mark.parametrize("task", list(EXAMPLES))
def test_a_prompt_is_sorted_by_what_a_real_prompt_of_that_task_has(task: Task) -> None:
    assert [classify_prompt(text) for text in EXAMPLES[task]] == [task] * len(EXAMPLES[task])


def test_the_synthetic_workloads_are_chat_so_their_calibration_holds() -> None:
    """Random words, the bundled chat prompts (one asks to translate an English sentence, two to summarise without a
    given text) and token ids, which the stand-in cannot read, are all chat: the task factor 1, as calibrated."""
    assert [classify_prompt(p) for p in chat_prompts()] == [Task.CHAT] * len(chat_prompts())
    specs = (WorkloadSpec(name="random", api="chat"), WorkloadSpec(name="chat"), WorkloadSpec(name="chat", api="chat"))
    for spec in specs:
        for request in build_requests(spec, 16):
            body = json.loads(request.body)
            text = body["messages"][-1]["content"] if "messages" in body else body["text"]
            assert classify_prompt(text) is Task.CHAT, (spec, text[:80])
    assert "input_ids" in json.loads(build_requests(WorkloadSpec(name="random"), 1)[0].body)
    assert IDS_TASK is Task.CHAT
    for profile in PROFILES.values():
        for draft in (*profile.drafts.values(), *profile.drafts_by_path.values()):
            assert draft.task_scales.for_task(Task.CHAT) == 1.0


def test_the_odds_of_a_rejection_are_scaled_and_stay_a_probability() -> None:
    assert odds_scaled_rejection(0.3, 1.0) == 0.3
    assert odds_scaled_rejection(0.01, 0.5) == pytest.approx(0.005, rel=0.01)  # rare rejections: the rejection scaled
    assert odds_scaled_rejection(0.5, 0.5) == pytest.approx(1 / 3)
    assert 0.84 < odds_scaled_rejection(0.84, 2.2) < 1.0  # a weak draft keeps some acceptance
    assert odds_scaled_rejection(0.0, 2.2) == 0.0 and odds_scaled_rejection(1.0, 0.5) == 1.0


def _iid_accept_length(per_token: float, depth: int) -> float:
    return sum(per_token**j for j in range(depth + 1))


def _per_token_for(accept_length: float, depth: int) -> float:
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _iid_accept_length(mid, depth) < accept_length else (lo, mid)
    return lo


def _ratio_at(chat_accept_length: float, depth: int, scale: float) -> float:
    """The accept-length ratio a task's odds scale gives a draft of this chat accept length and depth (a chain of
    i.i.d. positions: the published tables give no more than the mean)."""
    p = _per_token_for(chat_accept_length, depth)
    return _iid_accept_length(1.0 - odds_scaled_rejection(1.0 - p, scale), depth) / chat_accept_length


# The published rows the scales were fitted to. EAGLE-3 Llama heads (nebius/EAGLE3-Llama-3.3-70B-Instruct's model
# card, temperature 1, K = 7): accept lengths on MT-bench, HumanEval, GSM8K.
EAGLE3_LLAMA = {
    "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B": (2.77, 3.49, 3.34),
    "RedHatAI Llama-3.3-70B eagle3": (2.88, 3.62, 3.29),
    "nebius/EAGLE3-Llama-3.3-70B-Instruct": (3.89, 5.08, 5.01),
}
# EAGLE on Spec-Bench (hemingkx/Spec-Bench Leaderboard.md, A100, greedy, batch 1): speedups on multi-turn
# conversation, translation, summarisation; the mean accepted tokens; the overall speedup.
SPEC_BENCH_EAGLE = {
    "Vicuna-7B": (2.67, 1.99, 2.23, 3.61, 2.29),
    "Vicuna-13B": (2.68, 1.96, 2.44, 3.64, 2.34),
    "Vicuna-33B": (2.79, 2.05, 2.51, 3.39, 2.47),
}


def test_the_task_scales_give_back_the_published_ratios_where_they_were_published() -> None:
    """At each published setting (EAGLE-3: 7 draft tokens; EAGLE on Spec-Bench: its tree of depth 5, the chat accept
    length taken as the mean τ × MT's share of the overall speedup) the scales give each row's ratio within 0.1, and
    the tasks in the published order."""
    s = EAGLE_TASK_SCALES
    for name, (chat, code, math) in EAGLE3_LLAMA.items():
        assert _ratio_at(chat, 7, s.code) == pytest.approx(code / chat, abs=0.1), name
        assert _ratio_at(chat, 7, s.math) == pytest.approx(math / chat, abs=0.13), name
        assert _ratio_at(chat, 7, s.code) > _ratio_at(chat, 7, s.math) > 1.0
    for name, (mt, translation, summarisation, mean_tau, overall) in SPEC_BENCH_EAGLE.items():
        chat = mean_tau * mt / overall
        assert _ratio_at(chat, 5, s.translation) == pytest.approx(translation / mt, abs=0.03), name
        assert _ratio_at(chat, 5, s.summarisation) == pytest.approx(summarisation / mt, abs=0.08), name
        assert _ratio_at(chat, 5, s.translation) < _ratio_at(chat, 5, s.summarisation) < 1.0


def test_kimi_s_eagle3_accepts_by_task_in_the_published_order_and_qwen_s_drafts_alike() -> None:
    kimi = PerfModel(KIMI, EAGLE3_V2)
    lengths = {task: kimi.expected_accept_length(0.0, True, task) for task in Task}
    assert lengths[Task.CHAT] == pytest.approx(1.38, abs=0.01)  # the profile's calibrated EAGLE3 acceptance
    order = [Task.TRANSLATION, Task.SUMMARISATION, Task.CHAT, Task.MATH, Task.CODE]
    assert sorted(lengths, key=lengths.__getitem__) == order
    low, high = PUBLISHED_CODE_OVER_CHAT
    assert low < lengths[Task.CODE] / lengths[Task.CHAT] <= high
    for algorithm in ("NEXTN", "EAGLE3"):  # AngelSlim: no task effect on Qwen3's EAGLE3 heads
        qwen = PerfModel(QWEN, {"speculative_algorithm": algorithm, "speculative_num_steps": 3})
        assert qwen._draft is not None and qwen._draft.task_scales == NO_TASK_EFFECT
        assert len({qwen.expected_accept_length(0.0, False, task) for task in Task}) == 1


def chat_tasks() -> list[Task]:
    return [classify_prompt(c["conversations"][0]["value"]) for c in chat_conversations(200)]


def code_tasks() -> list[Task]:
    return [classify_prompt(r["prompt"]) for r in code_prompts(200)]


def test_the_generated_chat_is_chat_and_the_code_is_code() -> None:
    assert set(chat_tasks()) == {Task.CHAT} and set(code_tasks()) == {Task.CODE}
    model = PerfModel(KIMI, EAGLE3_V2)
    on_chat = model.expected_accept_length(0.0, True, Task.CHAT)
    on_code = model.expected_accept_length(0.0, True, Task.CODE)
    assert on_chat == pytest.approx(1.38, abs=0.01) and on_code == pytest.approx(1.57, abs=0.01)  # docs/tune.md


@pytest.mark.parametrize("concurrency", [1, 8])
def test_on_the_kimi_profile_eagle3_loses_on_chat_and_gains_most_of_its_loss_back_on_code(concurrency: int) -> None:
    """The model on the virtual clock, with each set's median lengths (bench_serving's way: temperature 0, the
    dataset's own output lengths forced). EAGLE3 ÷ no speculation: chat 0.92 / 0.77, code 1.04 / 0.90 at C = 1 / 8."""
    runs = max(16, 4 * concurrency)
    chat_in = int(statistics.median(len(c["conversations"][0]["value"].split()) for c in chat_conversations(200)))
    chat_out = int(statistics.median(len(c["conversations"][1]["value"].split()) for c in chat_conversations(200)))
    code_in = int(statistics.median(len(r["prompt"].split()) for r in code_prompts(200)))
    code_out = int(statistics.median(r["output_len"] for r in code_prompts(200)))

    def gain(inp: int, out: int, task: Task) -> float:
        def tok_s(setup: dict[str, object]) -> float:
            return simulate_closed_loop(KIMI, setup, concurrency, inp, out, runs, task=task).output_throughput

        return tok_s(EAGLE3_V2) / tok_s(NO_SPEC)

    on_chat, on_code = gain(chat_in, chat_out, Task.CHAT), gain(code_in, code_out, Task.CODE)
    assert on_chat < 0.95
    assert on_code > on_chat + 0.1


@pytest.mark.system  # a real stand-in process
async def test_a_real_stand_in_accepts_more_on_the_code_set(kimi_eagle3: SimProcess, tmp_path: Path) -> None:
    """What a benchmark sees: the per-request accept length (Σ tokens / Σ verifies from each request's meta_info)
    on 32 requests of each set, 120 output tokens each (about 1,000 verify rounds a set)."""
    chat_file, code_file = write_datasets(tmp_path, count=60, seed=3)
    measured = {}
    for name, path in (("chat", chat_file), ("code", code_file)):
        sample = sample_dataset(path, size=32, seed=1, output_len_cap=120)
        config = SweepConfig(WorkloadSpec(name="dataset", dataset=sample), concurrencies=[4], requests=32, warmup=0)
        async with BenchClient(kimi_eagle3.url) as client:
            level = (await BenchEngine(client, config).run()).levels[0]
        assert level.metrics["failed"] == 0 and level.accept_length_source == "requests"
        measured[name] = level.metrics["accept_length"]
    model = PerfModel(KIMI, EAGLE3_V2)
    assert measured["chat"] == pytest.approx(model.expected_accept_length(0.0, True), rel=0.06)
    assert measured["code"] == pytest.approx(model.expected_accept_length(0.0, True, Task.CODE), rel=0.06)
    assert 1.05 < measured["code"] / measured["chat"] <= PUBLISHED_CODE_OVER_CHAT[1], measured  # 1.12 measured
