"""The per-version flag registry: versions by range, and the flags the fact sheet names."""

import pytest

from console.sglang.flags import (
    NEWEST_VERSION,
    SUPPORTED_VERSIONS,
    UnsupportedVersionError,
    flag_table,
    flag_versions,
    parse_version,
    resolve_version,
)

ALL = SUPPORTED_VERSIONS
# flag -> versions it must exist in (from the releases' own argparse)
EXPECTED = {
    "--speculative-algorithm": ALL,
    "--speculative-draft-model-path": ALL,
    "--speculative-draft-model": ALL,
    "--speculative-num-steps": ALL,
    "--speculative-eagle-topk": ALL,
    "--speculative-num-draft-tokens": ALL,
    "--speculative-accept-threshold-single": ALL,
    "--speculative-accept-threshold-acc": ALL,
    "--speculative-token-map": ALL,
    "--speculative-attention-mode": ALL,
    "--speculative-ngram-max-bfs-breadth": ALL,
    "--speculative-ngram-min-match-window-size": ("0.5.6", "0.5.9"),
    "--speculative-ngram-max-trie-depth": ("0.5.12", "0.5.14", "0.5.17", "0.5.23"),
    "--speculative-adaptive": ("0.5.12", "0.5.14", "0.5.17", "0.5.23"),
    "--speculative-use-rejection-sampling": ("0.5.14", "0.5.17", "0.5.23"),
    "--model-path": ALL,
    "--model": ALL,
    "--host": ALL,
    "--port": ALL,
    "--api-key": ALL,
    "--served-model-name": ALL,
    "--enable-metrics": ALL,
    "--decode-log-interval": ALL,
    "--stream-interval": ALL,
    "--log-level": ALL,
    "--trust-remote-code": ALL,
    "--context-length": ALL,
    "--page-size": ALL,
    "--mem-fraction-static": ALL,
    "--max-running-requests": ALL,
    "--chunked-prefill-size": ALL,
    "--cuda-graph-max-bs": ("0.5.6", "0.5.9", "0.5.12", "0.5.14", "0.5.17"),
    "--cuda-graph-max-bs-decode": ("0.5.14", "0.5.17", "0.5.23"),
    "--cuda-graph-bs": ("0.5.6", "0.5.9", "0.5.12", "0.5.14", "0.5.17"),
    "--disable-cuda-graph": ALL,
    "--attention-backend": ALL,
    "--prefill-attention-backend": ALL,
    "--decode-attention-backend": ALL,
    "--disable-overlap-schedule": ALL,
    "--enable-dp-attention": ALL,
    "--dp-size": ALL,
    "--tp-size": ALL,
    "--tensor-parallel-size": ALL,
    "--quantization": ALL,
    "--kv-cache-dtype": ALL,
    "--enable-mixed-chunk": ALL,
    "--skip-server-warmup": ALL,
    "--watchdog-timeout": ALL,
    "--enable-torch-compile": ALL,
    "--tool-call-parser": ALL,
    "--reasoning-parser": ALL,
    "--disable-radix-cache": ALL,
    "--load-format": ALL,
    "--dtype": ALL,
    "--tokenizer-path": ALL,
    "--revision": ALL,
}


@pytest.mark.parametrize("flag", sorted(EXPECTED))
def test_named_flags_exist_in_the_right_versions(flag: str) -> None:
    assert flag_versions(flag) == EXPECTED[flag]


def test_flag_spec_fields() -> None:
    table = flag_table("0.5.9")
    steps = table.by_dest["speculative_num_steps"]
    assert (steps.type, steps.nargs, steps.default, steps.takes_value) == ("int", None, None, True)
    algorithm = table.by_dest["speculative_algorithm"]
    assert algorithm.choices == ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
    assert flag_table("0.5.23").by_dest["speculative_algorithm"].choices is None  # a free string there
    bs = table.by_dest["cuda_graph_bs"]
    assert bs.is_list and bs.type == "int"
    tp = table.by_dest["tp_size"]  # 0.5.6-0.5.12 store it as tensor_parallel_size; ServerArgs calls it tp_size
    assert set(tp.options) == {"--tp-size", "--tensor-parallel-size"} and tp.name == "--tp-size"
    assert tp.aliases == ("--tensor-parallel-size",)
    model = table.by_dest["model_path"]
    assert model.required and model.aliases == ("--model",)
    assert table.by_dest["enable_metrics"].is_boolean
    assert table.by_dest["watchdog_timeout"].default == 300


def test_prefix_lookup() -> None:
    table = flag_table(NEWEST_VERSION)
    assert table.lookup("--speculative-algo") is table.by_dest["speculative_algorithm"]
    assert table.lookup("--cuda-graph-max-bs") is None  # ambiguous in 0.5.23: -decode / -prefill
    assert flag_table("0.5.9").lookup("--cuda-graph-max-bs") is flag_table("0.5.9").by_dest["cuda_graph_max_bs"]
    assert table.spec_for("tp_size") is table.lookup("--tp-size")


@pytest.mark.parametrize(
    ("given", "rules_of"),
    [
        (None, NEWEST_VERSION),
        ("0.5.6", "0.5.6"),
        ("0.5.6.post2", "0.5.6"),
        ("v0.5.9", "0.5.9"),
        ("0.5.10", "0.5.9"),
        ("0.5.13rc1", "0.5.12"),
        ("0.5.16", "0.5.14"),
        ("0.5.17", "0.5.17"),
        ("0.5.22", "0.5.17"),
        ("0.5.23", "0.5.23"),
        ("0.6.1", "0.5.23"),
    ],
)
def test_resolve_version_takes_the_nearest_lower(given: str | None, rules_of: str) -> None:
    assert resolve_version(given) == rules_of


@pytest.mark.parametrize("bad", ["0.5.5", "0.4.9", "banana", ""])
def test_unsupported_versions_are_refused(bad: str) -> None:
    with pytest.raises(UnsupportedVersionError, match="supported"):
        resolve_version(bad)


def test_parse_version() -> None:
    assert parse_version("0.5.6.post2") == (0, 5, 6)
    assert parse_version("1.0") == (1, 0, 0)
