"""The systemd unit model: parse, byte-identical render, minimal edits (examples and properties)."""

import difflib
import math
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.sglang import launchers
from console.sglang.launchers import SGLANG, LauncherSpec, register_launcher
from console.sglang.unit import UnitError, UnitFile, parse_timespan, quote_word, tokenize

# A site's wrapper around SGLang with options of its own, registered the way the project's stand-in registers.
WRAPPER = LauncherSpec(
    module="site.sglang_wrapper", own_option_prefix="--wrap-", version_option="--wrap-sglang-version"
)


@pytest.fixture
def wrapper() -> Iterator[LauncherSpec]:
    """Only SGLang and WRAPPER registered for one test; the registry is put back afterwards."""
    saved = dict(launchers._registry)
    launchers._registry.clear()
    launchers._registry[SGLANG.module] = SGLANG
    register_launcher(WRAPPER)
    try:
        yield WRAPPER
    finally:
        launchers._registry.clear()
        launchers._registry.update(saved)


UNIT = """\
[Unit]
Description=SGLang (Qwen3.5-122B)
After=network-online.target

[Service]
# tuned 2026-11
User=sglang
WorkingDirectory=/opt/sglang
Environment="SGLANG_ENABLE_SPEC_V2=1" CUDA_VISIBLE_DEVICES=0,1,2,3
Environment=HF_HOME=/data/hf "NCCL_SOCKET_IFNAME=eth0"
EnvironmentFile=-/etc/sglang.env
ExecStart=/opt/venv/bin/python -m sglang.launch_server \\
    --model-path /models/Qwen3.5-122B-A10B-FP8 \\
    --tp 4 \\
    --speculative-algo EAGLE \\
    --speculative-num-st 2 --speculative-eagle-topk=1 \\
    --cuda-graph-bs-decode 1 2 4 8 \\
    --enable-metrics \\
    --served-model-name "qwen 122b"
Restart=on-failure
TimeoutStartSec=1800
TimeoutStopSec=600
SomethingUnknown=yes

[Install]
WantedBy=multi-user.target
"""


def changed_lines(before: str, after: str) -> list[str]:
    """Removed (-) then added (+) lines, each group in file order."""
    return sorted(
        [
            line
            for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        ],
        key=lambda line: line[0] == "+",
    )


def test_parse_reads_every_part() -> None:
    unit = UnitFile.parse(UNIT)
    assert unit.render() == UNIT
    assert unit.user == "sglang" and unit.working_directory == "/opt/sglang" and unit.restart == "on-failure"
    assert unit.directive("TimeoutStartSec") == "1800" and unit.directive("TimeoutStopSec") == "600"
    assert unit.environment_files() == ["-/etc/sglang.env"]
    assert unit.environment() == {
        "SGLANG_ENABLE_SPEC_V2": "1",
        "CUDA_VISIBLE_DEVICES": "0,1,2,3",
        "HF_HOME": "/data/hf",
        "NCCL_SOCKET_IFNAME": "eth0",
    }
    launch = unit.launch
    assert launch.launcher == ("/opt/venv/bin/python", "-m", "sglang.launch_server") and launch.spec == SGLANG
    assert launch.own_options == () and launch.sglang_version is None
    assert unit.flags() == [
        "--model-path",
        "/models/Qwen3.5-122B-A10B-FP8",
        "--tp",
        "4",
        "--speculative-algo",
        "EAGLE",
        "--speculative-num-st",
        "2",
        "--speculative-eagle-topk=1",
        "--cuda-graph-bs-decode",
        "1",
        "2",
        "4",
        "8",
        "--enable-metrics",
        "--served-model-name",
        "qwen 122b",
    ]


@pytest.mark.parametrize(
    ("exec_start", "launcher", "module"),
    [
        ("python -m sglang.launch_server --model-path m", ("python", "-m", "sglang.launch_server"), SGLANG.module),
        (
            "/usr/bin/python3 -m sglang.launch_server --model-path m",
            ("/usr/bin/python3", "-m", "sglang.launch_server"),
            SGLANG.module,
        ),
        (
            "python3.11 -u -m sglang.launch_server --model-path m",
            ("python3.11", "-u", "-m", "sglang.launch_server"),
            SGLANG.module,
        ),
        ("/srv/venv/bin/sglang serve --model-path m", ("/srv/venv/bin/sglang", "serve"), SGLANG.module),
        (
            "-/srv/v/bin/python -m site.sglang_wrapper --model-path m",
            ("-/srv/v/bin/python", "-m", "site.sglang_wrapper"),
            WRAPPER.module,
        ),
    ],
)
def test_launchers(exec_start: str, launcher: tuple[str, ...], module: str, wrapper: LauncherSpec) -> None:
    unit = UnitFile.parse(f"[Service]\nExecStart={exec_start}\n")
    assert unit.launch.launcher == launcher and unit.launch.spec.module == module
    assert unit.flags() == ["--model-path", "m"]


def test_a_registered_launchers_own_options_are_kept_but_are_not_sglang_flags(wrapper: LauncherSpec) -> None:
    text = "[Service]\nExecStart=python -m site.sglang_wrapper --wrap-a 0.01 --model-path m --wrap-b p --tp 2\n"
    unit = UnitFile.parse(text)
    assert unit.flags() == ["--model-path", "m", "--tp", "2"]
    assert unit.launch.own_options == ("--wrap-a", "0.01", "--wrap-b", "p")
    unit.set_flag("--wrap-a", "0.5")
    unit.set_flag("--tp-size", "4")
    assert unit.render() == text.replace("0.01", "0.5").replace("--tp 2", "--tp 4")
    assert unit.unset_flag("--wrap-b") and UnitFile.parse(unit.render()).launch.own_options == ("--wrap-a", "0.5")


def test_an_unregistered_module_is_not_an_sglang_launcher_and_the_error_lists_the_known_ones() -> None:
    text = "[Service]\nExecStart=python -m site.sglang_wrapper --model-path m\n"
    with pytest.raises(UnitError, match="not SGLang") as refused:
        UnitFile.parse(text).flags()
    assert "`python -m sglang.launch_server`" in str(refused.value) and "site.sglang_wrapper`" not in str(refused.value)


def test_a_launcher_names_the_sglang_version_it_behaves_as(wrapper: LauncherSpec) -> None:
    def version(words: str) -> str | None:
        return UnitFile.parse(f"[Service]\nExecStart=python -m site.sglang_wrapper {words}\n").launch.sglang_version

    assert version("--wrap-sglang-version 0.5.6 --model-path m") == "0.5.6"
    assert version("--model-path m --wrap-sglang-version=0.5.9") == "0.5.9"
    assert version("--wrap-sglang-version 0.5.6 --wrap-sglang-version 0.5.9") == "0.5.9"  # the last one, as argparse
    assert version("--model-path m") is None
    plain = "[Service]\nExecStart=python -m sglang.launch_server --model-path m --wrap-sglang-version 0.5.6\n"
    assert UnitFile.parse(plain).launch.sglang_version is None  # not SGLang's option: it reaches its parser


def test_launcher_registration_is_idempotent_and_refuses_a_second_owner(wrapper: LauncherSpec) -> None:
    register_launcher(WRAPPER)
    assert launchers.registered_launchers() == (SGLANG, WRAPPER)
    with pytest.raises(ValueError, match="already registered"):
        register_launcher(LauncherSpec(module=WRAPPER.module, own_option_prefix="--other-"))


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"module": "python -m x"}, "module name"),
        ({"module": "x", "own_option_prefix": "-x"}, "own_option_prefix"),
        ({"module": "x", "own_option_prefix": "--x-", "version_option": "--sglang-version"}, "must start with"),
        ({"module": "x", "version_option": "--x-version"}, "must start with"),
    ],
)
def test_a_malformed_launcher_spec_is_refused(kwargs: dict[str, str], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        LauncherSpec(**kwargs)


# ---- what a process runner reads: argv, stop timeout, restart delay -------------------------------------


def test_exec_argv_is_the_whole_command_as_systemd_splits_it() -> None:
    text = (
        '[Service]\nExecStart=-/opt/v/bin/python -u \\\n    /srv/run.py --name "a b" --pct 50%% --cost $$5 \\\n'
        "    --sim-x 1\n"
    )
    assert UnitFile.parse(text).exec_argv() == [
        "/opt/v/bin/python", "-u", "/srv/run.py", "--name", "a b", "--pct", "50%", "--cost", "$5", "--sim-x", "1",
    ]  # fmt: skip
    # Any program: a process runner does not need an SGLang launcher.
    assert UnitFile.parse("[Service]\nExecStart=@/usr/sbin/nginx -g daemon\n").exec_argv()[0] == "/usr/sbin/nginx"
    with pytest.raises(UnitError, match="no ExecStart"):
        UnitFile.parse("[Unit]\nExecStart=/bin/true\n[Service]\nType=simple\n").exec_argv()


def test_an_empty_exec_start_resets_the_list_as_in_systemd() -> None:
    reset_last = "[Service]\nExecStart=python -m sglang.launch_server --model m\nExecStart=\n"
    with pytest.raises(UnitError, match="no ExecStart"):
        UnitFile.parse(reset_last).flags()
    reset_first = "[Service]\nExecStart=/bin/old\nExecStart=\nExecStart=python -m sglang.launch_server --model m\n"
    unit = UnitFile.parse(reset_first)
    assert unit.flags() == ["--model", "m"] and unit.exec_argv()[0] == "python"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("0.5", 0.5),
        ("500ms", 0.5),
        ("2s", 2.0),
        ("2 sec", 2.0),
        ("2min 30s", 150.0),
        ("1min30s", 90.0),
        ("1.5h", 5400.0),
        ("1d", 86400.0),
        ("250us", 0.00025),
        ("infinity", math.inf),
    ],
)
def test_parse_timespan(text: str, seconds: float) -> None:
    assert parse_timespan(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "abc", "5 parsecs", "-3s", "s", "1.2.3"])
def test_parse_timespan_refuses_what_systemd_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="time span"):
        parse_timespan(text)


def test_stop_timeout_and_restart_delay_follow_systemd() -> None:
    def unit(lines: str) -> UnitFile:
        return UnitFile.parse(f"[Service]\nExecStart=/bin/x\n{lines}\n")

    assert unit("").timeout_stop_s is None and unit("").restart_sec is None  # the caller's defaults apply
    assert unit("TimeoutStopSec=30").timeout_stop_s == 30.0
    assert unit("TimeoutStopSec=30\nTimeoutSec=2min").timeout_stop_s == 120.0  # the last assignment wins
    assert unit("TimeoutSec=2min\nTimeoutStopSec=5").timeout_stop_s == 5.0
    assert unit("TimeoutStopSec=30\nTimeoutStopSec=soon").timeout_stop_s == 30.0  # invalid: ignored
    assert unit("TimeoutStopSec=30\nTimeoutStopSec=").timeout_stop_s is None  # empty: back to the default
    assert unit("TimeoutStopSec=infinity").timeout_stop_s == math.inf
    assert unit("TimeoutStopSec=0").timeout_stop_s == math.inf  # systemd reads 0 as "no timeout"
    assert unit("RestartSec=50ms").restart_sec == pytest.approx(0.05) and unit("RestartSec=0").restart_sec == 0.0
    assert UnitFile.parse("[Unit]\nTimeoutStopSec=3\n[Service]\nExecStart=/bin/x\n").timeout_stop_s is None


def test_edit_existing_flags_in_place_through_aliases_and_prefixes() -> None:
    unit = UnitFile.parse(UNIT)
    unit.set_flag("--speculative-num-steps", "3")  # written as the prefix --speculative-num-st
    unit.set_flag("--tensor-parallel-size", "8")  # written as --tp
    unit.set_flag("speculative_eagle_topk", "2")  # by dest; written as --flag=value
    unit.set_flag("--cuda-graph-bs-decode", ["1", "2"])
    assert changed_lines(UNIT, unit.render()) == [
        "-    --tp 4 \\",
        "-    --speculative-num-st 2 --speculative-eagle-topk=1 \\",
        "-    --cuda-graph-bs-decode 1 2 4 8 \\",
        "+    --tp 8 \\",
        "+    --speculative-num-st 3 --speculative-eagle-topk=2 \\",
        "+    --cuda-graph-bs-decode 1 2 \\",
    ]


def test_new_flags_are_appended_in_the_same_style() -> None:
    unit = UnitFile.parse(UNIT)
    unit.set_flag("--max-running-requests", "64")
    unit.set_flag("--disable-overlap-schedule", True)
    assert unit.render() == UNIT.replace(
        '"qwen 122b"\n', '"qwen 122b" \\\n    --max-running-requests 64 \\\n    --disable-overlap-schedule\n'
    )
    one_line = "[Service]\nExecStart=python3 -m sglang.launch_server --model-path m\nRestart=always\n"
    unit = UnitFile.parse(one_line)
    unit.set_flag("--served-model-name", "a b%c$d")
    assert unit.render() == one_line.replace(" m\n", ' m --served-model-name "a b%%c$$d"\n')
    assert unit.flags()[-1] == "a b%c$d"


def test_unset_removes_the_flag_and_its_line() -> None:
    unit = UnitFile.parse(UNIT)
    assert unit.unset_flag("--enable-metrics") is True
    assert unit.unset_flag("--served-model") is True  # prefix of --served-model-name, the last line
    assert unit.unset_flag("--max-running-requests") is False
    assert changed_lines(UNIT, unit.render()) == [
        "-    --cuda-graph-bs-decode 1 2 4 8 \\",
        "-    --enable-metrics \\",
        '-    --served-model-name "qwen 122b"',
        "+    --cuda-graph-bs-decode 1 2 4 8",
    ]
    assert UnitFile.parse(unit.render()).flags()[-1] == "8"


def test_booleans() -> None:
    unit = UnitFile.parse("[Service]\nExecStart=python -m sglang.launch_server --model m --no-lora-strict-loading\n")
    unit.set_flag("--lora-strict-loading", True)
    assert unit.flags() == ["--model", "m", "--lora-strict-loading"]
    unit.set_flag("--enable-metrics", True)
    unit.set_flag("--enable-metrics", True)  # already there: no change
    assert unit.flags().count("--enable-metrics") == 1
    unit.set_flag("--enable-metrics", False)
    assert "--enable-metrics" not in unit.flags()
    with pytest.raises(UnitError, match="on/off flag"):
        unit.set_flag("--enable-metrics", "yes")
    with pytest.raises(UnitError, match="takes a value"):
        unit.set_flag("--port", True)


def test_environment_edits() -> None:
    unit = UnitFile.parse(UNIT)
    unit.set_env("SGLANG_ENABLE_SPEC_V2", "0")
    unit.set_env("NEW_VAR", "a b")
    unit.unset_env("HF_HOME")
    assert changed_lines(UNIT, unit.render()) == [
        '-Environment="SGLANG_ENABLE_SPEC_V2=1" CUDA_VISIBLE_DEVICES=0,1,2,3',
        '-Environment=HF_HOME=/data/hf "NCCL_SOCKET_IFNAME=eth0"',
        '+Environment="SGLANG_ENABLE_SPEC_V2=0" CUDA_VISIBLE_DEVICES=0,1,2,3',
        '+Environment="NCCL_SOCKET_IFNAME=eth0"',
        '+Environment="NEW_VAR=a b"',
    ]
    unit.unset_env("NCCL_SOCKET_IFNAME")
    assert "Environment=\n" not in unit.render() and "NCCL" not in unit.render()
    assert unit.environment() == {"SGLANG_ENABLE_SPEC_V2": "0", "CUDA_VISIBLE_DEVICES": "0,1,2,3", "NEW_VAR": "a b"}
    with pytest.raises(UnitError, match="environment variable name"):
        unit.set_env("BAD-NAME", "1")


def test_first_environment_line_goes_before_exec_start() -> None:
    text = "[Service]\nUser=x\nExecStart=python -m sglang.launch_server --model m\n"
    unit = UnitFile.parse(text)
    unit.set_env("A", "1")
    assert unit.render() == '[Service]\nUser=x\nEnvironment="A=1"\nExecStart=python -m sglang.launch_server --model m\n'


def test_units_that_do_not_start_sglang() -> None:
    with pytest.raises(UnitError, match="no ExecStart"):
        UnitFile.parse("[Service]\nUser=x\n").flags()
    with pytest.raises(UnitError, match="not SGLang"):
        UnitFile.parse("[Service]\nExecStart=/usr/bin/nginx -g daemon\n").flags()
    with pytest.raises(UnitError, match="unbalanced"):
        UnitFile.parse('[Service]\nExecStart=python -m sglang.launch_server --model "m\n').flags()


def test_a_stray_word_reaches_the_rules_and_survives_an_edit_next_to_it() -> None:
    unit = UnitFile.parse("[Service]\nExecStart=python -m sglang.launch_server --model-path m stray --port 1 --tp 2\n")
    assert unit.flags() == ["--model-path", "m", "stray", "--port", "1", "--tp", "2"]  # SGLang refuses "stray"
    unit.unset_flag("--port")
    assert unit.render() == "[Service]\nExecStart=python -m sglang.launch_server --model-path m stray --tp 2\n"


def test_an_empty_environment_line_resets_the_list_and_survives_edits() -> None:
    text = '[Service]\nEnvironment="A=1" "B=2"\nEnvironment=\nExecStart=python -m sglang.launch_server --model m\n'
    assert UnitFile.parse(text).environment() == {}  # systemd: `Environment=` drops what came before
    unset = UnitFile.parse(text)
    unset.unset_env("A")
    assert unset.render() == text.replace('"A=1" ', "")
    changed = UnitFile.parse(text)
    changed.set_env("A", "3")
    assert changed.environment() == {"A": "3"}


def test_unbalanced_quote_error_keeps_the_line_secrets_out() -> None:
    launch = '[Service]\nExecStart=python -m sglang.launch_server --model m --api-key "sk-hidden-1\n'
    with pytest.raises(UnitError, match="unbalanced") as exec_start:
        UnitFile.parse(launch).flags()
    env = '[Service]\nEnvironment="HF_TOKEN=hf-hidden-2 A=1\nExecStart=python -m sglang.launch_server --model m\n'
    with pytest.raises(UnitError, match="unbalanced") as environment:
        UnitFile.parse(env).environment()
    assert "--model m --api-key ***" in str(exec_start.value) and "sk-hidden-1" not in str(exec_start.value)
    assert "HF_TOKEN=***" in str(environment.value) and "hf-hidden-2" not in str(environment.value)


# ---- properties ---------------------------------------------------------------------------------------

WORD = st.text(alphabet=st.sampled_from("ab/.:%$ \"'\\=-_09"), min_size=1, max_size=12)
ENV_KEYS = st.sampled_from(["A", "HF_HOME", "SGLANG_ENABLE_SPEC_V2", "CUDA_VISIBLE_DEVICES", "X_1"])
VALUE_FLAGS = ["--model-path", "--served-model-name", "--port", "--tp-size", "--api-key", "--tool-call-parser"]
BOOL_FLAGS = ["--enable-metrics", "--trust-remote-code", "--skip-server-warmup"]
OTHER_LINES = st.sampled_from(
    ["# a comment\n", "\n", "SomethingUnknown=yes\n", "; old style comment\n", "Restart=always\n"]
)


@st.composite
def units(draw: st.DrawFn) -> tuple[str, list[str], dict[str, str]]:
    env_lines = draw(st.lists(st.lists(st.tuples(ENV_KEYS, WORD), min_size=1, max_size=3), max_size=3))
    flags: list[str] = []
    pieces: list[str] = []
    for name in draw(st.lists(st.sampled_from(VALUE_FLAGS + BOOL_FLAGS), min_size=1, max_size=5, unique=True)):
        if name in BOOL_FLAGS:
            flags.append(name)
            pieces.append(name)
        else:
            value = draw(WORD)
            flags += [name, value]
            joiner = "=" if draw(st.booleans()) or value.startswith("-") else " "  # argparse needs = for "-x"
            pieces.append(name + joiner + quote_word(value, exec_escapes=True))
    separator = " \\\n    " if draw(st.booleans()) else " "
    lines = ["[Unit]\n", "Description=x\n", "[Service]\n"]
    env: dict[str, str] = {}
    for assignments in env_lines:
        lines.append(
            "Environment=" + " ".join(quote_word(f"{k}={v}", exec_escapes=False) for k, v in assignments) + "\n"
        )
        env.update(assignments)
    lines += draw(st.lists(OTHER_LINES, max_size=3))
    lines.append("ExecStart=python3 -m sglang.launch_server" + separator + separator.join(pieces) + "\n")
    lines += draw(st.lists(OTHER_LINES, max_size=3))
    return "".join(lines), flags, env


def canonical(argv: list[str]) -> list[str]:
    out: list[str] = []
    for word in argv:
        if word.startswith("--") and "=" in word:
            out += word.split("=", 1)
        else:
            out.append(word)
    return out


@settings(max_examples=150, deadline=None)
@given(units())
def test_round_trip_is_byte_identical_and_reads_back_the_values(case: tuple[str, list[str], dict[str, str]]) -> None:
    text, flags, env = case
    unit = UnitFile.parse(text)
    assert unit.render() == text
    assert canonical(unit.flags()) == flags
    assert unit.environment() == env


@settings(max_examples=150, deadline=None)
@given(units(), st.sampled_from(VALUE_FLAGS), WORD)
def test_set_flag_changes_only_that_flag(case: tuple[str, list[str], dict[str, str]], name: str, value: str) -> None:
    text, flags, env = case
    unit = UnitFile.parse(text)
    unit.set_flag(name, value)
    after = unit.render()
    reread = UnitFile.parse(after)
    expected = list(flags)
    if name in expected:
        expected[expected.index(name) + 1] = value
    else:
        expected += [name, value]
    assert canonical(reread.flags()) == expected
    assert reread.environment() == env
    outside = [line for line in text.splitlines() if not line.startswith(("ExecStart", "    ", "--"))]
    assert [line for line in after.splitlines() if not line.startswith(("ExecStart", "    ", "--"))] == outside


@settings(max_examples=150, deadline=None)
@given(units(), ENV_KEYS, WORD)
def test_set_env_changes_only_that_variable(case: tuple[str, list[str], dict[str, str]], key: str, value: str) -> None:
    text, flags, env = case
    unit = UnitFile.parse(text)
    unit.set_env(key, value)
    reread = UnitFile.parse(unit.render())
    assert reread.environment() == {**env, key: value}
    assert canonical(reread.flags()) == flags
    kept = [line for line in text.splitlines() if not line.startswith("Environment=")]
    assert [line for line in unit.render().splitlines() if not line.startswith("Environment=")] == kept


@settings(max_examples=100, deadline=None)
@given(units(), st.sampled_from(VALUE_FLAGS + BOOL_FLAGS))
def test_unset_then_reparse(case: tuple[str, list[str], dict[str, str]], name: str) -> None:
    text, flags, _ = case
    unit = UnitFile.parse(text)
    was_there = unit.unset_flag(name)
    assert was_there == (name in flags)
    expected = list(flags)
    if name in expected:
        i = expected.index(name)
        del expected[i : i + (1 if name in BOOL_FLAGS else 2)]
    assert canonical(UnitFile.parse(unit.render()).flags()) == expected


@given(WORD)
def test_quote_word_round_trips(word: str) -> None:
    for exec_escapes in (True, False):
        tokens = tokenize(quote_word(word, exec_escapes=exec_escapes), exec_escapes=exec_escapes)
        assert [t.value for t in tokens] == [word]


def test_a_value_that_looks_like_an_option_is_written_with_equals() -> None:
    unit = UnitFile.parse("[Service]\nExecStart=python -m sglang.launch_server --model m --served-model-name a\n")
    unit.set_flag("--served-model-name", "-x")
    unit.set_flag("--chunked-prefill-size", "-1")  # a negative number is a plain value for argparse
    assert unit.render().endswith("--model m --served-model-name=-x --chunked-prefill-size -1\n")
