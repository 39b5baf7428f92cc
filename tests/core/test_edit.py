"""The editor's model (pure): fields from the version's flag table, the edit a form makes, the silent changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.core.apply import applied_setups, record_applied
from console.core.apply.edit import NONE_CHOICE, SPEC_V2_DEST, editor_form, running_values

UNIT = """[Service]
Environment="SGLANG_ENABLE_SPEC_V2=False"
ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path m --tp-size 4 \\
    --speculative-algorithm EAGLE --speculative-draft-model-path d --speculative-num-steps 2 \\
    --speculative-eagle-topk 1 --speculative-num-draft-tokens 3
"""


def test_fields_come_from_the_versions_flag_table_speculative_first() -> None:
    form = editor_form(UNIT, "0.5.9")
    dests = [f.dest for f in form.fields]
    assert dests[:4] == [
        "speculative_algorithm",
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_num_draft_tokens",
    ]
    assert SPEC_V2_DEST in dests  # 0.5.9 reads SGLANG_ENABLE_SPEC_V2
    assert SPEC_V2_DEST not in [f.dest for f in editor_form(UNIT, "0.5.14").fields]  # gone from 0.5.14
    algorithm = form.field("speculative_algorithm")
    assert algorithm.kind == "choice" and algorithm.choices[0] == NONE_CHOICE and "EAGLE3" in algorithm.choices
    assert form.field("speculative_num_steps").kind == "int" and form.field("mem_fraction_static").kind == "float"
    assert form.field("attention_backend").kind == "choice" and "triton" in form.field("attention_backend").choices
    assert form.values["speculative_num_steps"] == "2" and form.values["tp_size"] == "4"
    assert form.values[SPEC_V2_DEST] == "false" and form.values["max_running_requests"] == ""


def test_the_edit_holds_only_what_changed_and_the_silent_changes_read_like_a_person_says_them() -> None:
    form = editor_form(UNIT, "0.5.9")
    preview = form.preview({**form.values, "speculative_num_steps": "3", "max_running_requests": ""})
    assert preview.edits.set_flags == (("--speculative-num-steps", "3"),) and not preview.edits.unset_flags
    assert preview.ok and preview.changed
    assert "draft tokens 3 -> 4" in preview.changes  # topk 1: SGLang makes draft tokens steps + 1
    assert "max running requests unset -> 48" in preview.changes
    assert "overlap off" in preview.changes


def test_sglangs_own_name_for_the_algorithm_reads_as_an_alias_not_as_a_change() -> None:
    form = editor_form(UNIT, "0.5.9")
    preview = form.preview({**form.values, "speculative_algorithm": "NEXTN"})
    assert preview.ok and "algorithm NEXTN (runs as EAGLE)" in preview.changes
    assert not any("->" in change for change in preview.changes if change.startswith("algorithm")), preview.changes


def test_a_refused_combination_and_an_unreadable_value_block_the_apply() -> None:
    form = editor_form(UNIT, "0.5.9")
    refused = form.preview({SPEC_V2_DEST: "true", "speculative_eagle_topk": "2", "speculative_num_draft_tokens": "4"})
    assert not refused.ok and refused.plan is not None
    assert any("spec v2" in e.message.lower() for e in refused.plan.report.errors)
    garbled = form.preview({"speculative_num_steps": "three"})
    assert not garbled.ok and garbled.plan is None
    assert garbled.problems == ("steps: a whole number, e.g. 3 (not 'three')",)


def test_clearing_a_field_removes_its_flag_and_none_removes_speculation() -> None:
    form = editor_form(UNIT, "0.5.9")
    cleared = form.preview({"speculative_num_draft_tokens": ""})
    assert cleared.edits.unset_flags == ("--speculative-num-draft-tokens",)
    off = form.preview({"speculative_algorithm": NONE_CHOICE})
    assert off.edits.unset_flags == ("--speculative-algorithm",)


@pytest.mark.parametrize(("kind_dest", "text", "delta", "expected"), [
    ("speculative_num_steps", "2", 1, "3"),
    ("speculative_num_steps", "0", -1, "0"),
    ("mem_fraction_static", "0.85", 1, "0.86"),
    ("max_running_requests", "", 1, "1"),
])  # fmt: skip
def test_plus_and_minus_step_numbers(kind_dest: str, text: str, delta: int, expected: str) -> None:
    assert editor_form(UNIT, "0.5.9").field(kind_dest).step(text, delta) == expected


def test_the_running_preset_takes_the_servers_resolved_values() -> None:
    form = editor_form(UNIT, "0.5.9")
    values = running_values(form, {"speculative_num_draft_tokens": 3, "max_running_requests": 48, "tp_size": 4})
    assert values["max_running_requests"] == "48" and values["speculative_num_steps"] == "2"


def test_applied_setups_are_kept_per_host_distinct_newest_first_and_without_secrets(tmp_path: Path) -> None:
    record_applied(tmp_path, "gpu-a", "sglang.service", {"speculative_num_steps": "2"}, set())
    record_applied(tmp_path, "gpu-b", "sglang.service", {"speculative_num_steps": "9"}, set())
    record_applied(tmp_path, "gpu-a", "sglang.service", {"speculative_num_steps": "3", "api_key": "sk-x"}, {"sk-x"})
    record_applied(tmp_path, "gpu-a", "sglang.service", {"speculative_num_steps": "2"}, set())
    (tmp_path / "applied.jsonl").open("a").write('{"host": "gpu-a", "cut sh')  # a crash mid-line
    found = applied_setups(tmp_path, "gpu-a", "sglang.service")
    assert [e.values["speculative_num_steps"] for e in found] == ["2", "3"]
    assert "sk-x" not in (tmp_path / "applied.jsonl").read_text()


def test_where_the_version_has_it_the_serving_section_offers_the_access_log_skips_with_its_reason() -> None:
    form = editor_form(UNIT, "0.5.9")
    skips = form.field("uvicorn_access_log_exclude_prefixes")
    assert skips.group == "serving" and skips.kind == "list" and skips.flag == "--uvicorn-access-log-exclude-prefixes"
    assert skips.hint == (
        "keep the console's polling out of the server's log: /health /metrics /v1/loads /server_info /model_info"
    )
    assert form.values["uvicorn_access_log_exclude_prefixes"] == "" and skips.default is None
    assert "uvicorn_access_log_exclude_prefixes" not in [f.dest for f in editor_form(UNIT, "0.5.6").fields]
    histograms = form.field("collect_tokens_histogram")  # 0.5.9: the token histograms need their flag
    serving = [f.hint for f in form.fields if f.hint and f.group == "serving"]
    assert serving == [histograms.hint, skips.hint]  # the others need no reason (a faster start's options each have)

    preview = form.preview({"uvicorn_access_log_exclude_prefixes": "/health, /metrics /v1/loads"})
    assert preview.ok and preview.edits.set_flags == (
        ("--uvicorn-access-log-exclude-prefixes", ["/health", "/metrics", "/v1/loads"]),
    )
    assert preview.plan is not None and "--uvicorn-access-log-exclude-prefixes /health /metrics /v1/loads" in (
        preview.plan.new_text
    )
    again = editor_form(preview.plan.new_text, "0.5.9")  # the unit written: the field shows what it holds
    assert again.values["uvicorn_access_log_exclude_prefixes"] == "/health /metrics /v1/loads"
    cleared = again.preview({"uvicorn_access_log_exclude_prefixes": ""})
    assert cleared.edits.unset_flags == ("--uvicorn-access-log-exclude-prefixes",)


def test_up_to_0_5_10_the_serving_section_offers_the_token_histograms_switch_with_its_reason() -> None:
    form = editor_form(UNIT, "0.5.6")
    switch = form.field("collect_tokens_histogram")
    assert (switch.group, switch.kind, switch.flag) == ("serving", "switch", "--collect-tokens-histogram")
    assert switch.hint == "length histograms in /metrics, for bench --shape-from-server"
    assert form.values["collect_tokens_histogram"] == ""
    on = form.preview({"collect_tokens_histogram": "true"})
    assert on.ok and on.edits.set_flags == (("--collect-tokens-histogram", True),)
    assert on.plan is not None and "--collect-tokens-histogram" in on.plan.new_text
    again = editor_form(on.plan.new_text, "0.5.6")
    assert again.values["collect_tokens_histogram"] == "true"
    off = again.preview({"collect_tokens_histogram": "false"})
    assert off.ok and off.edits.unset_flags == ("--collect-tokens-histogram",)
    assert off.plan is not None and "--collect-tokens-histogram" not in off.plan.new_text
    for version in ("0.5.12", "0.5.17", "0.5.23"):  # recorded always from 0.5.11: the flag a no-op, not offered
        assert "collect_tokens_histogram" not in [f.dest for f in editor_form(UNIT, version).fields]
