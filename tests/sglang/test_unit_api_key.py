"""console.sglang.unit.unit_api_key: the key a unit starts SGLang with, as SGLang reads it (issue 22, item 5)."""

from __future__ import annotations

import pytest

from console.sglang.unit import unit_api_key

UNIT = """[Service]
Environment="SGLANG_ENABLE_SPEC_V2=False" "HF_TOKEN=hf_not_the_key"
ExecStart=/usr/bin/python3 -m sglang.launch_server \\
    --model-path Qwen/Qwen3-8B {key}\\
    --port 30000
"""


@pytest.mark.parametrize(
    ("written", "key"),
    [
        ("--api-key sk-one ", "sk-one"),
        ("--api-key=sk-two ", "sk-two"),
        ("--api-key 'sk three' ", "sk three"),  # systemd's quoting
        ("--admin-api-key sk-admin ", None),  # another key: not the one every request needs
        ("", None),
    ],
)
def test_the_units_api_key(written: str, key: str | None) -> None:
    assert unit_api_key(UNIT.format(key=written)) == key


def test_no_key_from_what_is_not_an_sglang_unit() -> None:
    assert unit_api_key("[Service]\nExecStart=/usr/bin/sleep --api-key x\n") is None
    assert unit_api_key("not a unit at all") is None
