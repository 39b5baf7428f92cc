"""SGLang's JSON shapes per version (pure builders)."""

from __future__ import annotations

import pytest

from console.sim import shapes
from console.sim.tokenizer import SimTokenizer, output_token_ids


def meta(version: str, finish: str | None = "length") -> dict[str, object]:
    return shapes.meta_info(
        version=version,
        rid="r",
        finish=finish,
        prompt_tokens=5,
        completion_tokens=30,
        spec=True,
        verify_ct=10,
        num_draft_tokens=4,
        e2e_latency=1.5,
    )


def test_meta_info_names_follow_the_version() -> None:
    # 30 tokens, 10 verify rounds: the first token is the prefill's, so the rounds accepted 29 - 10 = 19 drafts
    old = meta("0.5.6.post2")
    assert old["spec_accept_token_num"] == 19 and old["spec_draft_token_num"] == 30
    assert "total_retractions" in old and "num_retractions" not in old
    new = meta("0.5.23")
    assert new["spec_num_correct_drafts"] == 19 and new["spec_num_proposed_drafts"] == 30
    assert "num_retractions" in new and "spec_accept_token_num" not in new
    assert "spec_accepted_drafts" not in new and "spec_accept_histogram" not in new  # 0.5.17's aliases are gone
    assert sum(new["spec_correct_drafts_histogram"]) == 10  # the rounds, spread evenly without the drawn ones
    for m in (old, new):
        assert m["spec_verify_ct"] == 10 and m["spec_accept_length"] == 3.0
        assert m["finish_reason"] == {"type": "length", "length": 30} and m["e2e_latency"] == 1.5


def test_only_the_final_chunk_carries_latency_and_spec_counters() -> None:
    running = meta("0.5.9", finish=None)
    assert running["finish_reason"] is None
    assert "spec_verify_ct" not in running and "e2e_latency" not in running


@pytest.mark.parametrize("version", ["0.5.9", "0.5.12", "0.5.17", "0.5.23"])
def test_no_spec_keys_without_a_verify_round(version: str) -> None:
    """One output token (the prefill's): no verify round, and from 0.5.9 on no spec key at all; 0.5.6 writes its
    zero defaults."""
    one = shapes.spec_meta_info(version, completion_tokens=1, verify_ct=0, num_draft_tokens=4)
    assert one == {}
    assert shapes.spec_meta_info("0.5.6", 1, 0, 4) == {"spec_accept_rate": 0.0, "spec_accept_length": 0,
                                                       "spec_verify_ct": 0}  # fmt: skip


@pytest.mark.parametrize(
    ("version", "get_load", "v1_loads"),
    [("0.5.6", True, False), ("0.5.9", True, True), ("0.5.14", True, True), ("0.5.23", False, True)],
)
def test_load_endpoints_by_version(version: str, get_load: bool, v1_loads: bool) -> None:
    assert shapes.has_get_load(version) is get_load
    assert shapes.has_v1_loads(version) is v1_loads


def test_server_info_extras_of_0_5_23() -> None:
    args = {"tp_size": 4, "speculative_num_steps": 2}
    common = dict(
        resolved=args,
        launch_command="x",
        max_total_num_tokens=100,
        context_length=10,
        internal_state={},
        startup_time=1,
    )
    old = shapes.server_info(version="0.5.6", **common)  # type: ignore[arg-type]
    new = shapes.server_info(version="0.5.23", **common)  # type: ignore[arg-type]
    assert "launch_command" not in old and new["launch_command"] == "x" and new["frontend"] == "python"
    assert old["internal_states"][0]["speculative_num_steps"] == 2 and old["max_req_input_len"] == 9


def test_tokenizer_round_trip_and_deterministic_output() -> None:
    tok = SimTokenizer()
    ids = output_token_ids(7, 0, 50)
    assert ids == output_token_ids(7, 0, 50) and ids != output_token_ids(8, 0, 50)
    assert tok.encode(tok.decode(ids)) == ids
    assert tok.encode("qqq") == [0]
    assert tok.encode("not-a-word") == [0] * 5  # words and punctuation apart, as the Whitespace pre-tokenizer splits
