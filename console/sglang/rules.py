"""What an SGLang server of a given version does with launch flags at startup: errors, silent adjustments,
warnings and the resolved values — pure code, no I/O.

Each rule is a small function whose docstring names the versions it holds for and the SGLang code behind
it (checked against the released wheels' server_args.py and the workers they start). The order of the rules
follows SGLang's own `_handle_speculative_decoding` (0.5.6–0.5.12 server_args.py; 0.5.14+
arg_groups/speculative_hook.py), because later rules see the values earlier ones resolved.

Every finding carries `sglang_log`: the text SGLang itself prints for it (the exception line or the
logger warning), so the simulator can fail and log exactly like the real server. It is not part of
`to_json()`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.sglang.adaptive import AdaptiveConfigError, candidate_union
from console.sglang.argv import ArgvProblem, parse_argv
from console.sglang.flags import FlagTable, flag_table, flag_versions, version_at_least
from console.sglang.specmode import EAGLE_FAMILY, SpecMode, spec_v2_worker
from console.sglang.vocabulary import CACHE_DIR_ENV, SPEC_V2_ENV, View, dests

SPEC_TRIPLE = dests(View.DRAFT_TREE)  # steps, topk, draft tokens

# Built-in algorithm names once `--speculative-algorithm` stopped having argparse choices (0.5.12).
# [0.5.23 speculative/spec_info.py:50-65] — plugins can register more; we cannot see those.
_BUILTIN_ALGORITHMS_0_5_12 = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "FROZEN_KV_MTP")
_BUILTIN_ALGORITHMS_0_5_23 = (*_BUILTIN_ALGORITHMS_0_5_12, "DSPARK", "UNO")

# Architectures for which the auto-choice picks (3, 1, 4) in every version. [0.5.6 server_args.py:4649-4680],
# [0.5.9 :5741-5775], [0.5.23 speculative_hook.py:1430-1461]
_CHAIN_ARCHITECTURES = (
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "GptOssForCausalLM",
    "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM",
    "GlmMoeDsaForCausalLM",
    "BailingMoeForCausalLM",
    "BailingMoeV2ForCausalLM",
    "BailingMoeV2_5ForCausalLM",
    "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration",
)
_TREE_ARCHITECTURES = ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM")
# A model path names its family often enough to guess the architecture when none is given.
_ARCHITECTURE_HINTS = (
    ("deepseek", "DeepseekV3ForCausalLM"),
    ("gpt-oss", "GptOssForCausalLM"),
    ("glm-4", "Glm4MoeForCausalLM"),
    ("grok", "Grok1ForCausalLM"),
    ("llama", "LlamaForCausalLM"),
)
_ADAPTIVE_CANDIDATE_STEPS = (1, 3, 7)  # [docs adaptive_speculative_decoding.md] default candidate_steps


@dataclass(frozen=True, slots=True)
class Finding:
    """An error (startup would fail) or a warning (legal but suspicious)."""

    code: str
    message: str
    flags: tuple[str, ...]
    sglang_log: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "flags": list(self.flags)}


@dataclass(frozen=True, slots=True)
class Adjustment:
    """A value SGLang changes silently (or with only a log line). `flag` is the ServerArgs field name."""

    flag: str
    from_value: Any
    to_value: Any
    reason: str
    sglang_log: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"flag": self.flag, "from": self.from_value, "to": self.to_value, "reason": self.reason}


@dataclass
class CheckReport:
    """The outcome of `check_launch`; `to_json()` is the documented `check-args --json` shape."""

    sglang_version: str
    errors: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    adjustments: list[Adjustment] = field(default_factory=list)
    resolved: dict[str, Any] = field(default_factory=dict)
    explicit: frozenset[str] = frozenset()
    # Speculative decoding only (None otherwise): does the server run the spec-v2 (overlap-capable) worker,
    # and is the overlap scheduler on (= not resolved["disable_overlap_schedule"]).
    spec_v2: bool | None = None
    overlap_schedule: bool | None = None

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def spec_mode(self) -> SpecMode | None:
        """The rules' verdict on the worker and the overlap (None without speculative decoding), for
        console.sglang.specmode.spec_mode where the server does not answer."""
        if self.spec_v2 is None and self.overlap_schedule is None:
            return None
        return SpecMode(self.spec_v2, self.overlap_schedule, "rules")

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "sglang_version": self.sglang_version,
            "errors": [e.to_json() for e in self.errors],
            "warnings": [w.to_json() for w in self.warnings],
            "adjustments": [a.to_json() for a in self.adjustments],
            "resolved": dict(self.resolved),
        }


class _Launch:
    """Mutable state the rules work on: the values SGLang would hold, and the report being built."""

    def __init__(self, table: FlagTable, values: dict[str, Any], explicit: set[str], env: Mapping[str, str]):
        self.table = table
        self.version = table.version
        self.values = values
        self.explicit = explicit
        self.env = env
        self.report = CheckReport(sglang_version=table.version)
        self.architecture: str | None = None
        self.adaptive_config: Mapping[str, Any] | None = None  # --speculative-adaptive-config's JSON, when read

    def get(self, dest: str) -> Any:
        return self.values.get(dest)

    def flag(self, dest: str) -> str:
        """The flag name to show for a dest (canonical spelling of this version)."""
        if dest.isupper():
            return dest  # an environment variable
        spec = self.table.by_dest.get(dest)
        return spec.name if spec else "--" + dest.replace("_", "-")

    def at_least(self, version: str) -> bool:
        return version_at_least(self.version, version)

    def error(self, code: str, message: str, dests: Sequence[str], sglang_log: str | None) -> None:
        self.report.errors.append(Finding(code, message, tuple(self.flag(d) for d in dests), sglang_log))

    def warn(self, code: str, message: str, dests: Sequence[str], sglang_log: str | None = None) -> None:
        self.report.warnings.append(Finding(code, message, tuple(self.flag(d) for d in dests), sglang_log))

    def adjust(self, dest: str, to: Any, reason: str, sglang_log: str | None = None) -> None:
        before = self.values.get(dest)
        self.values[dest] = to
        if before != to:
            self.report.adjustments.append(Adjustment(dest, before, to, reason, sglang_log))


# ---------------------------------------------------------------------------------------------------------
# argv problems


def _argv_error(launch: _Launch, problem: ArgvProblem) -> None:
    """argparse errors (all versions): SGLang prints `usage: ...` and `<prog>: error: <message>`, exits 2."""
    log = f"{launch.table.prog}: error: {problem.message}"
    advice = _argv_advice(launch, problem)
    launch.report.errors.append(Finding(problem.code, f"{problem.message}. {advice}", problem.flags, log))


def _argv_advice(launch: _Launch, problem: ArgvProblem) -> str:
    version = launch.version
    if problem.code == "unknown-flag":
        hints = [_unknown_flag_hint(launch.table, option) for option in problem.flags if option.startswith("-")]
        hints = [h for h in hints if h]
        why = f"SGLang {version}'s argument parser refuses flags it does not define"
        return f"{why}; remove them or fix the spelling. {' '.join(hints)}".strip()
    if problem.code == "ambiguous-prefix":
        option = problem.flags[0].partition("=")[0]
        other = flag_versions(option)
        elsewhere = f" ({option} itself exists in SGLang {', '.join(other)})" if other else ""
        return (
            f"SGLang {version} accepts an abbreviated flag only when it matches exactly one flag; "
            f"write the full flag name{elsewhere}."
        )
    if problem.code == "missing-required":
        return f"SGLang {version} cannot start without the model: add --model-path PATH_OR_HF_ID."
    if problem.code == "invalid-choice":
        return f"SGLang {version} accepts only the listed values for {problem.flags[0]}; use one of them."
    if problem.code == "invalid-value":
        return f"SGLang {version} converts this value with the flag's type and refuses it; give a number."
    if problem.code == "unexpected-value":
        return f"{problem.flags[0]} is an on/off flag in SGLang {version}: write it alone, without a value."
    return f"{problem.flags[0]} needs a value in SGLang {version}: write it after the flag."


def _unknown_flag_hint(table: FlagTable, option: str) -> str:
    name = option.partition("=")[0]
    versions = flag_versions(name)
    if versions:
        hint = f"{name} exists in SGLang {', '.join(versions)} but not in {table.version}."
        if name == "--cuda-graph-max-bs":
            hint += " Use --cuda-graph-max-bs-decode there."
        return hint
    import difflib  # only when there is an unknown flag to explain

    close = difflib.get_close_matches(name, list(table.by_option), n=1, cutoff=0.8)
    return f"Did you mean {close[0]}?" if close else ""


# ---------------------------------------------------------------------------------------------------------
# environment


def _env_bool(launch: _Launch, name: str, default: bool) -> bool:
    """SGLang's EnvBool: true/1/yes/y and false/0/no/n, case-insensitive; anything else raises.
    [0.5.6 srt/environ.py:98-105]"""
    raw = launch.env.get(name)
    if raw is None:
        return default
    value = raw.lower()
    if value in ("true", "1", "yes", "y"):
        return True
    if value in ("false", "0", "no", "n"):
        return False
    launch.report.errors.append(
        Finding(
            "invalid-env",
            f"{name}={raw!r} is not a boolean SGLang understands, and reading it raises at startup. "
            f"Use {name}=true or {name}=false.",
            (name,),
            f'ValueError: "{value}" is not a valid boolean value',
        )
    )
    return default


def spec_v2_env_default(version: str) -> bool | None:
    """`SGLANG_ENABLE_SPEC_V2` default per version; None where the variable no longer exists.
    [0.5.6 environ.py:318 False], [0.5.9 environ.py:414 False], [0.5.12 environ.py:470 True], removed in 0.5.14."""
    if version_at_least(version, "0.5.14"):
        return None
    return version_at_least(version, "0.5.12")


# ---------------------------------------------------------------------------------------------------------
# rules (in SGLang's order)


def builtin_algorithms(version: str) -> tuple[str, ...]:
    """The speculative algorithms a release builds in (FROZEN_KV_MTP left out: SGLang picks it for a Gemma4 draft)."""
    names = _BUILTIN_ALGORITHMS_0_5_23 if version_at_least(version, "0.5.23") else _BUILTIN_ALGORITHMS_0_5_12
    return tuple(n for n in names if n != "FROZEN_KV_MTP")


def rule_algorithm_name(launch: _Launch) -> None:
    """0.5.12+: `--speculative-algorithm` is a free string, upper-cased, and an unknown name raises
    ValueError "Unknown speculative algorithm name: X" [0.5.23 speculative/spec_info.py:50-65,
    0.5.14 speculative_hook.py:64-65]. (0.5.6/0.5.9 have argparse choices, checked by the parser.)"""
    algorithm = launch.get("speculative_algorithm")
    if algorithm is None or not launch.at_least("0.5.12"):
        return
    upper = str(algorithm).upper()
    if upper != algorithm:
        launch.adjust("speculative_algorithm", upper, "SGLang upper-cases the speculative algorithm name")
    builtins = _BUILTIN_ALGORITHMS_0_5_23 if launch.at_least("0.5.23") else _BUILTIN_ALGORITHMS_0_5_12
    if upper not in builtins:
        launch.error(
            "unknown-algorithm",
            f"--speculative-algorithm {algorithm} is not an algorithm SGLang {launch.version} knows "
            f"(built in: {', '.join(builtins)}; plugins can add more), so startup raises. "
            "Use EAGLE, EAGLE3, NEXTN (MTP), STANDALONE or NGRAM.",
            ["speculative_algorithm"],
            f"ValueError: Unknown speculative algorithm name: {algorithm}",
        )


def rule_draft_window_size(launch: _Launch) -> None:
    """0.5.17: `--speculative-draft-window-size` must be positive (ValueError), whatever the algorithm.
    [0.5.17 speculative_hook.py:105-119]"""
    size = launch.get("speculative_draft_window_size")
    if size is None or not launch.at_least("0.5.17") or launch.at_least("0.5.23") or int(size) > 0:
        return
    text = f"--speculative-draft-window-size must be positive, got {int(size)}."
    launch.error(
        "draft-window-size",
        f"{text} SGLang refuses to start; give a positive window or remove the flag.",
        ["speculative_draft_window_size"],
        f"ValueError: {text}",
    )


def rule_skip_dp_mlp_sync(launch: _Launch) -> None:
    """0.5.17: `--speculative-skip-dp-mlp-sync` is asserted to go with EAGLE only. [0.5.17 speculative_hook.py:
    132-136]; the flag is gone in 0.5.23."""
    if not launch.get("speculative_skip_dp_mlp_sync") or launch.get("speculative_algorithm") == "EAGLE":
        return
    if not launch.at_least("0.5.17") or launch.at_least("0.5.23"):
        return
    algorithm = launch.get("speculative_algorithm")
    text = f"--speculative-skip-dp-mlp-sync is only supported with speculative_algorithm == EAGLE, got {algorithm}."
    launch.error(
        "skip-dp-mlp-sync-algorithm",
        f"{text} SGLang asserts this at startup; remove the flag or use EAGLE.",
        ["speculative_skip_dp_mlp_sync", "speculative_algorithm"],
        f"AssertionError: {text}",
    )


def rule_nextn_is_eagle(launch: _Launch) -> None:
    """All versions: `NEXTN` (MTP) is an alias resolved to `EAGLE` before anything else.
    [0.5.6 server_args.py:1731-1732], [0.5.9 :2352-2353], [0.5.23 speculative_hook.py:42]"""
    if launch.get("speculative_algorithm") == "NEXTN":
        launch.adjust("speculative_algorithm", "EAGLE", "NEXTN is an alias of EAGLE (MTP uses the EAGLE worker)")


def rule_standalone_dp_attention(launch: _Launch) -> None:
    """All versions: STANDALONE with `--enable-dp-attention` raises ValueError.
    [0.5.6 server_args.py:1733-1737], [0.5.14 speculative_hook.py:256-264]"""
    if launch.get("speculative_algorithm") == "STANDALONE" and launch.get("enable_dp_attention"):
        text = "Currently standalone speculative decoding does not support dp attention."
        launch.error(
            "standalone-dp-attention",
            "--speculative-algorithm STANDALONE cannot run with --enable-dp-attention: SGLang raises at startup "
            f"('{text}'). Remove --enable-dp-attention or use EAGLE/EAGLE3 with a draft model.",
            ["speculative_algorithm", "enable_dp_attention"],
            f"ValueError: {text}",
        )


def rule_max_running_requests(launch: _Launch) -> None:
    """All versions, EAGLE family and NGRAM: an unset `--max-running-requests` is reset to 48.
    [0.5.6 server_args.py:1739-1743, 1834-1838], [0.5.23 speculative_hook.py:1086-1094, 1294-1302]"""
    if launch.get("max_running_requests") is None:
        text = (
            "Max running requests is reset to 48 for speculative decoding. "
            "You can override this by explicitly setting --max-running-requests."
        )
        launch.adjust(
            "max_running_requests",
            48,
            "speculative decoding resets an unset --max-running-requests to 48 (CUDA graphs are captured only "
            "up to 48 running requests); set it explicitly for more concurrency",
            text,
        )


def rule_overlap_and_spec_v2(launch: _Launch) -> None:
    """The overlap scheduler / spec-v2 timeline for EAGLE, EAGLE3, STANDALONE (server_args.py and the EAGLE workers):

    - 0.5.6: env `SGLANG_ENABLE_SPEC_V2` (default false). Env true and EAGLE -> overlap forced on; env false ->
      overlap forced off; env true with EAGLE3/STANDALONE keeps the configured value. [0.5.6 server_args.py:1745-1758]
    - 0.5.9: env default false, applies to EAGLE/EAGLE3/STANDALONE. Env true -> overlap on and an *explicit*
      `--speculative-eagle-topk` > 1 raises ValueError; env false -> overlap off. [0.5.9 server_args.py:2367-2389]
    - 0.5.12: env default true. Explicit topk > 1 (overlap not already off) -> overlap off, spec v1; env false
      -> overlap off, spec v1. [0.5.12 server_args.py:3748-3771]
    - 0.5.14+: env removed (0.5.14 logs a removal notice); always the V2 worker, `--disable-overlap-schedule`
      only picks the synchronous path. [0.5.14 speculative_hook.py:66-74, 276-280]
    """
    algorithm = launch.get("speculative_algorithm")
    topk = launch.get("speculative_eagle_topk")
    explicit_topk_gt1 = "speculative_eagle_topk" in launch.explicit and topk is not None and topk > 1
    default = spec_v2_env_default(launch.version)
    if default is None:
        if launch.env.get(SPEC_V2_ENV) is not None:
            text = (
                "SGLANG_ENABLE_SPEC_V2 has been removed: speculative decoding always runs the V2 worker. "
                "Use --disable-overlap-schedule to select the non-overlap (synchronous) path."
            )
            launch.warn(
                "spec-v2-env-removed",
                f"{SPEC_V2_ENV} has no effect in SGLang {launch.version}: the V2 worker always runs. "
                "Remove it; use --disable-overlap-schedule for the synchronous path.",
                [],
                text if not launch.at_least("0.5.23") else None,
            )
        launch.report.overlap_schedule = not launch.get("disable_overlap_schedule")
        launch.report.spec_v2 = spec_v2_worker(launch.version, algorithm, launch.report.overlap_schedule)
        if launch.get("disable_overlap_schedule"):
            launch.warn(
                "spec-v2-synchronous",
                "--disable-overlap-schedule selects the synchronous spec-v2 path: draft cost is not hidden.",
                ["disable_overlap_schedule"],
                "Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding.",
            )
        return

    enabled = _env_bool(launch, SPEC_V2_ENV, default)
    if not launch.at_least("0.5.9"):
        if algorithm == "EAGLE" and enabled:
            launch.adjust(
                "disable_overlap_schedule",
                False,
                f"{SPEC_V2_ENV} is true: SGLang 0.5.6 turns the overlap scheduler on for EAGLE (beta spec v2)",
                "Beta spec is enabled for eagle speculative decoding and overlap schedule is turned on.",
            )
        if not enabled:
            launch.adjust(
                "disable_overlap_schedule",
                True,
                f"{SPEC_V2_ENV} is not true: SGLang 0.5.6 disables the overlap scheduler for speculative decoding",
                "Overlap scheduler is disabled because of using eagle3 or standalone speculative decoding.",
            )
    elif not launch.at_least("0.5.12"):
        if enabled:
            launch.adjust(
                "disable_overlap_schedule",
                False,
                f"{SPEC_V2_ENV} is true: the overlap scheduler is turned on (spec v2)",
                "Spec v2 is enabled for eagle/eagle3 speculative decoding and overlap schedule is turned on.",
            )
            if explicit_topk_gt1:
                text = "Spec v2 currently only supports topk = 1 for speculative decoding."
                launch.error(
                    "spec-v2-topk",
                    f"{SPEC_V2_ENV}=1 with --speculative-eagle-topk {topk}: SGLang {launch.version}'s spec v2 "
                    f"supports only topk = 1 and refuses to start. Set --speculative-eagle-topk 1 (and "
                    f"--speculative-num-draft-tokens = steps + 1), or remove {SPEC_V2_ENV} to use spec v1 "
                    "with a tree.",
                    ["speculative_eagle_topk", SPEC_V2_ENV],
                    f"ValueError: {text}",
                )
        else:
            launch.adjust(
                "disable_overlap_schedule",
                True,
                f"{SPEC_V2_ENV} is not true: SGLang {launch.version} turns the overlap scheduler off (spec v1)",
                "Overlap scheduler is disabled when spec v2 is off or using unsupported speculative algorithm. "
                "You can set env SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler. ",
            )
    else:
        reason = None
        if explicit_topk_gt1 and not launch.get("disable_overlap_schedule"):
            reason = "spec v2 currently only supports topk = 1"
        elif not enabled and not launch.get("disable_overlap_schedule"):
            reason = "SGLANG_ENABLE_SPEC_V2=False"
        text = (
            f"Spec v1 is used for eagle/eagle3/standalone speculative decoding because "
            f"{reason or 'overlap schedule is disabled'}."
        )
        if reason is not None:
            launch.adjust(
                "disable_overlap_schedule",
                True,
                f"SGLang {launch.version} falls back to spec v1 without overlap because {reason}",
                text,
            )
    launch.report.overlap_schedule = not launch.get("disable_overlap_schedule")
    launch.report.spec_v2 = spec_v2_worker(launch.version, algorithm, launch.report.overlap_schedule)


def rule_mixed_chunk_off(launch: _Launch) -> None:
    """All versions, EAGLE family and NGRAM: `--enable-mixed-chunk` is turned off with a warning (and
    check_server_args asserts it is off). [0.5.6 server_args.py:1760-1765, 1840-1841, 4120-4124]"""
    if launch.get("enable_mixed_chunk"):
        algorithm = launch.get("speculative_algorithm")
        log = (
            f"Mixed chunked prefill is disabled: {algorithm} speculative decoding does not support it."
            if launch.at_least("0.5.23")  # [0.5.23 speculative_hook.py:1114-1118]
            else "Mixed chunked prefill is disabled because of using eagle speculative decoding."
        )
        launch.adjust(
            "enable_mixed_chunk",
            False,
            "mixed chunked prefill cannot run with speculative decoding; SGLang turns it off",
            log,
        )


def _architecture(launch: _Launch, given: str | None) -> str | None:
    if given:
        return given
    model = str(launch.get("model_path") or "").lower()
    for hint, architecture in _ARCHITECTURE_HINTS:
        if hint in model:
            return architecture
    return None


def auto_speculative_params(version: str, algorithm: str, architecture: str | None) -> tuple[int, int, int]:
    """SGLang's `auto_choose_speculative_params` (steps, topk, draft tokens).
    [0.5.6 server_args.py:4649-4680], [0.5.9 :5741-5775], [0.5.23 speculative_hook.py:1430-1461]"""
    if algorithm == "STANDALONE":
        return (3, 1, 4)
    chain: tuple[str, ...] = _CHAIN_ARCHITECTURES
    if version_at_least(version, "0.5.23"):
        chain = (*chain, "MiMoV2ForCausalLM")
    elif version_at_least(version, "0.5.17"):  # [0.5.17 speculative_hook.py:795-825]
        chain = (*chain, "MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM")
    if architecture in chain:
        return (3, 1, 4)
    if architecture in _TREE_ARCHITECTURES:
        return (5, 4, 8)
    return (5, 4, 8) if not version_at_least(version, "0.5.9") else (3, 1, 4)


def rule_adaptive(launch: _Launch) -> bool:
    """`--speculative-adaptive` (0.5.12 on): EAGLE/EAGLE3 with topk 1, no DP attention (0.5.17 on also no multi-layer
    EAGLE, two-batch overlap or PDMux) only; otherwise it is switched off with a warning and runs static. When on:
    topk := 1 if unset, steps := the middle of the candidate steps if unset, steps must be a candidate (ValueError),
    draft tokens := steps + 1. 0.5.23's candidates are the union of its per-batch-size config's
    (`--speculative-adaptive-config`, default 0, 1, 3, 5, 7; console.sglang.adaptive). Returns True when adaptive
    mode handled the triple. [0.5.23 speculative_hook.py:1374-1427; speculative/adaptive_spec_params.py:28-158]"""
    if not launch.get("speculative_adaptive"):
        return False
    algorithm = launch.get("speculative_algorithm")
    topk = launch.get("speculative_eagle_topk")
    v0517 = launch.at_least("0.5.17")
    reason = None
    if algorithm not in ("EAGLE", "EAGLE3"):
        reason = f"speculative_algorithm={algorithm} is not EAGLE/EAGLE3"
    elif topk is not None and topk != 1:
        reason = f"speculative_eagle_topk={topk} is not 1"
    elif launch.get("enable_dp_attention"):
        reason = "DP attention is enabled"
    elif v0517 and launch.get("enable_multi_layer_eagle"):  # [0.5.17 adaptive_spec_params.py:50-86]
        reason = "enable_multi_layer_eagle=True is not supported"
    elif v0517 and launch.get("enable_two_batch_overlap"):
        reason = "enable_two_batch_overlap=True is not supported"
    elif v0517 and launch.get("enable_pdmux"):
        reason = "enable_pdmux=True is not supported"
    if reason is not None:
        launch.adjust(
            "speculative_adaptive",
            False,
            f"adaptive speculative decoding is not supported here ({reason}); SGLang falls back to static params",
            f"speculative_adaptive disabled: {reason}. Falling back to static speculative params.",
        )
        return False
    candidates = _adaptive_candidates(launch)
    if candidates is None:
        return True  # the config itself is refused (rule_adaptive_config said why)
    if topk is None:
        launch.adjust("speculative_eagle_topk", 1, "adaptive speculative decoding uses topk = 1")
    if launch.get("speculative_num_steps") is None:
        launch.adjust(
            "speculative_num_steps", candidates[len(candidates) // 2], "adaptive mode starts in the middle tier"
        )
    steps = launch.get("speculative_num_steps")
    if steps not in candidates:
        text = (
            f"--speculative-num-steps={steps} is not in the adaptive config candidate_steps {candidates}. "
            "Pass one of those values."
        )
        launch.error(
            "adaptive-steps",
            f"{text} SGLang refuses to start with --speculative-adaptive otherwise.",
            ["speculative_num_steps", "speculative_adaptive"],
            f"ValueError: {text}",
        )
        return True
    launch.adjust("speculative_num_draft_tokens", steps + 1, "adaptive mode sets draft tokens to steps + 1")
    return True


def _adaptive_candidates(launch: _Launch) -> list[int] | None:
    """The launch steps adaptive mode accepts: 0.5.17's default union 0, 1, 3, 7 [0.5.17 adaptive_spec_params.py:
    22-48, 129-137]; 0.5.23's config union (the default's 0, 1, 3, 5, 7; a config file's when the caller read it, else
    the default's with a warning that the file's were not checked); 0.5.12-0.5.14's documented 1, 3, 7."""
    if not launch.at_least("0.5.17"):
        return list(_ADAPTIVE_CANDIDATE_STEPS)
    if not launch.at_least("0.5.23"):
        return [0, 1, 3, 7]
    path = launch.get("speculative_adaptive_config")
    if path and launch.adaptive_config is None:
        launch.warn(
            "adaptive-config-unread",
            f"--speculative-adaptive-config {path} is read by SGLang when it starts: its candidate steps were not "
            "checked here (the default tiers 0, 1, 3, 5, 7 were)",
            ["speculative_adaptive_config"],
        )
    config = launch.adaptive_config if path else None
    try:
        return candidate_union(config)
    except AdaptiveConfigError as exc:
        launch.error("adaptive-config", f"{path}: {exc}", ["speculative_adaptive_config"], f"ValueError: {exc}")
        return None


def rule_spec_triple(launch: _Launch, architecture: str | None) -> None:
    """All versions, EAGLE family: with `--speculative-num-steps` unset SGLang *asserts* topk and draft tokens
    are unset too and auto-chooses the triple by architecture [0.5.6 server_args.py:1789-1798]. With steps set
    and topk unset it skips the auto-choice and later fails comparing `topk > 1` (TypeError)
    [0.5.6 :1800-1826]. With topk > 1 and draft tokens unset nothing fills them in. Docs: set all three or
    none [docs speculative_decoding.md "EAGLE Decoding"]."""
    steps, topk, draft = (launch.get(d) for d in SPEC_TRIPLE)
    if steps is None:
        if topk is not None or draft is not None:
            given = [d for d in SPEC_TRIPLE if launch.get(d) is not None]
            launch.error(
                "spec-params-partial",
                f"{' and '.join(launch.flag(d) for d in given)} set without --speculative-num-steps: SGLang "
                "auto-chooses all three only when all are unset and asserts that (AssertionError). Set all three "
                "of --speculative-num-steps, --speculative-eagle-topk, --speculative-num-draft-tokens, or none.",
                SPEC_TRIPLE,
                "AssertionError",
            )
            return
        chosen = auto_speculative_params(launch.version, launch.get("speculative_algorithm"), architecture)
        basis = f"architecture {architecture}" if architecture else "an architecture not in SGLang's table"
        for dest, value in zip(SPEC_TRIPLE, chosen, strict=True):
            launch.adjust(dest, value, f"auto-chosen by SGLang {launch.version} for {basis}")
        if architecture is None:
            launch.warn(
                "auto-choice-architecture-unknown",
                f"The speculative triple is auto-chosen from the model's architecture, which check-args cannot "
                f"read; assumed a generic one -> {chosen}. Llama and Grok models get (5, 4, 8), DeepSeek/GLM/"
                "GPT-OSS (3, 1, 4). Pass the architecture (check-args --architecture) or set all three flags.",
                SPEC_TRIPLE,
            )
        return
    if topk is None:
        launch.error(
            "spec-params-partial",
            "--speculative-num-steps is set but --speculative-eagle-topk is not: SGLang then skips its auto-choice "
            "and fails comparing topk with a number (TypeError). Set --speculative-eagle-topk (and "
            "--speculative-num-draft-tokens) too, or remove --speculative-num-steps.",
            SPEC_TRIPLE,
            "TypeError: '>' not supported between instances of 'NoneType' and 'int'",
        )
        return
    if draft is None and topk > 1:
        launch.error(
            "spec-params-partial",
            f"--speculative-num-steps and --speculative-eagle-topk {topk} are set but --speculative-num-draft-tokens "
            "is not: SGLang fills it in only for topk = 1, so the tree has no verify width and startup fails. "
            f"Set --speculative-num-draft-tokens (at most steps × topk + 1 = {steps * topk + 1}).",
            SPEC_TRIPLE,
            "TypeError: unsupported operand type(s) for +: 'NoneType' and 'int'",
        )
    elif draft is None:
        launch.warn(
            "spec-params-partial",
            "--speculative-num-draft-tokens is not set; with topk = 1 SGLang sets it to steps + 1. "
            "Set all three speculative flags explicitly when tuning.",
            SPEC_TRIPLE,
        )


def rule_trtllm_mha_topk(launch: _Launch) -> None:
    """All versions: `trtllm_mha` as attention, prefill or decode backend with topk > 1 raises ValueError.
    [0.5.6 server_args.py:1800-1808], [0.5.23 speculative_hook.py:1176-1180]"""
    topk = launch.get("speculative_eagle_topk")
    backends = ("attention_backend", "prefill_attention_backend", "decode_attention_backend")
    using = [b for b in backends if launch.get(b) == "trtllm_mha"]
    if using and topk is not None and topk > 1:
        text = "trtllm_mha backend only supports topk = 1 for speculative decoding."
        launch.error(
            "trtllm-mha-topk",
            f"{launch.flag(using[0])} trtllm_mha with --speculative-eagle-topk {topk}: the trtllm_mha kernels "
            "verify only a chain, so SGLang refuses to start. Use --speculative-eagle-topk 1, or another "
            "attention backend (fa3, flashinfer) for tree drafting.",
            ["speculative_eagle_topk", *using],
            f"ValueError: {text}",
        )


def rule_mla_backends_topk(launch: _Launch) -> None:
    """All versions: FlashMLA supports topk = 1 only (runtime error "Currently FlashMLA only supports
    topk=1 ..."), and flex_attention does not support speculative decoding at all (assert).
    [0.5.6 layers/attention/flashmla_backend.py:519], [0.5.6 server_args.py:1417-1424]"""
    topk = launch.get("speculative_eagle_topk")
    backend = launch.get("attention_backend")
    if backend == "flashmla" and topk is not None and topk > 1:
        launch.error(
            "flashmla-topk",
            f"--attention-backend flashmla with --speculative-eagle-topk {topk}: FlashMLA verifies only a chain "
            "and fails at the first speculative batch. Use --speculative-eagle-topk 1.",
            ["attention_backend", "speculative_eagle_topk"],
            "AssertionError: Currently FlashMLA only supports topk=1 for speculative decoding",
        )
    if backend == "flex_attention":
        launch.error(
            "flex-attention-spec",
            "--attention-backend flex_attention does not support speculative decoding; SGLang asserts at startup. "
            "Pick another attention backend or remove --speculative-algorithm.",
            ["attention_backend", "speculative_algorithm"],
            "AssertionError: Speculative decoding is not supported with flex attention backend",
        )


def rule_chain_draft_tokens(launch: _Launch) -> None:
    """All versions: with topk == 1 SGLang silently sets draft tokens := steps + 1 (a chain verifies exactly
    steps + 1 tokens). [0.5.6 server_args.py:1810-1817], [0.5.9 :2443-2450], [0.5.23 speculative_hook.py:1255-1268]"""
    steps, topk, draft = (launch.get(d) for d in SPEC_TRIPLE)
    if topk == 1 and steps is not None and draft != steps + 1:
        launch.adjust(
            "speculative_num_draft_tokens",
            steps + 1,
            "with --speculative-eagle-topk 1 the draft is a chain: SGLang sets draft tokens to steps + 1",
            "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1",
        )


def rule_paged_tree(launch: _Launch) -> None:
    """topk > 1 with page_size > 1 raises ValueError unless the attention backend is flashinfer or fa3
    (0.5.6–0.5.12), flashinfer, fa3 or triton (0.5.14+). [0.5.6 server_args.py:1819-1826],
    [0.5.14 speculative_hook.py:392-405], [0.5.23 speculative_hook.py:1270-1282]"""
    topk = launch.get("speculative_eagle_topk")
    page_size = launch.get("page_size") or 1
    backend = launch.get("attention_backend")
    allowed = ("flashinfer", "fa3", "triton") if launch.at_least("0.5.14") else ("flashinfer", "fa3")
    if topk is None or topk <= 1 or page_size <= 1 or backend in allowed:
        return
    if launch.at_least("0.5.14"):
        text = (
            f"speculative_eagle_topk > 1 with page_size > 1 is only supported on {allowed}; got "
            f"attention_backend={backend!r}. Use page_size == 1 or one of those backends."
        )
    else:
        text = (
            "speculative_eagle_topk > 1 with page_size > 1 is unstable and produces incorrect results for paged "
            "attention backends. This combination is only supported for the 'flashinfer' backend."
        )
    launch.error(
        "paged-tree",
        f"--speculative-eagle-topk {topk} with --page-size {page_size} needs the attention backend to be one of "
        f"{', '.join(allowed)} in SGLang {launch.version} (got {backend or 'the automatic choice'}); SGLang refuses "
        f"to start. Set --page-size 1, --attention-backend {allowed[0]}, or --speculative-eagle-topk 1.",
        ["speculative_eagle_topk", "page_size", "attention_backend"],
        f"ValueError: {text}",
    )


def rule_tree_capacity(launch: _Launch) -> None:
    """Warning (all versions): draft tokens > steps × topk + 1 cannot all be filled by the tree; SGLang's own
    tuner skips such configs [scripts/playground/bench_speculative.py], issue #6309 relates it to illegal
    memory accesses."""
    steps, topk, draft = (launch.get(d) for d in SPEC_TRIPLE)
    if None in (steps, topk, draft):
        return
    if draft > steps * topk + 1:
        launch.warn(
            "draft-tokens-exceed-tree",
            f"--speculative-num-draft-tokens {draft} is more than steps × topk + 1 = {steps * topk + 1}: a tree of "
            f"depth {steps} and width {topk} cannot hold that many candidates (SGLang's own tuner skips this, "
            f"issue #6309 reports illegal memory accesses). Use at most {steps * topk + 1}.",
            list(SPEC_TRIPLE),
        )


def rule_rejection_sampling(launch: _Launch) -> None:
    """0.5.23: `--speculative-use-rejection-sampling` needs EAGLE/EAGLE3 (NotImplementedError), topk 1 and
    accept thresholds of 1.0 (ValueError). [0.5.23 speculative_hook.py:1214-1253]"""
    if not launch.get("speculative_use_rejection_sampling"):
        return
    algorithm = launch.get("speculative_algorithm")
    if algorithm not in ("EAGLE", "EAGLE3"):
        text = (
            "--speculative-use-rejection-sampling is only supported for EAGLE / EAGLE3 / NEXTN, not "
            f"speculative_algorithm={algorithm}."
        )
        launch.error(
            "rejection-sampling-algorithm",
            f"{text} Remove --speculative-use-rejection-sampling or switch the algorithm.",
            ["speculative_use_rejection_sampling", "speculative_algorithm"],
            f"NotImplementedError: {text}",
        )
        return
    if launch.get("speculative_eagle_topk") != 1:
        text = "--speculative-use-rejection-sampling requires --speculative-eagle-topk=1."
        launch.error(
            "rejection-sampling-topk",
            f"{text} SGLang refuses to start; set --speculative-eagle-topk 1.",
            ["speculative_use_rejection_sampling", "speculative_eagle_topk"],
            f"ValueError: {text}",
        )
    if launch.get("enable_deterministic_inference") and launch.at_least("0.5.17") and not launch.at_least("0.5.23"):
        text = (
            "--speculative-use-rejection-sampling is incompatible with --enable-deterministic-inference; the "
            "sampling kernel draws coins from the global RNG and is not batch-invariant."
        )
        launch.error(  # [0.5.17 speculative_hook.py:634-640]
            "rejection-sampling-deterministic",
            f"{text} Remove one of the two flags.",
            ["speculative_use_rejection_sampling", "enable_deterministic_inference"],
            f"ValueError: {text}",
        )
    thresholds = (launch.get("speculative_accept_threshold_single"), launch.get("speculative_accept_threshold_acc"))
    if thresholds != (1.0, 1.0):
        text = (
            "--speculative-use-rejection-sampling is incompatible with --speculative-accept-threshold-single / "
            "--speculative-accept-threshold-acc; rejection sampling ignores the accept thresholds."
        )
        launch.error(
            "rejection-sampling-thresholds",
            f"{text} Remove the threshold flags.",
            [
                "speculative_use_rejection_sampling",
                "speculative_accept_threshold_single",
                "speculative_accept_threshold_acc",
            ],
            f"ValueError: {text}",
        )


def rule_ngram(launch: _Launch) -> None:
    """NGRAM: DP attention raises ValueError; max running requests 48; mixed chunk off; topk :=
    `--speculative-ngram-max-bfs-breadth`; draft tokens default = max match window (12) in 0.5.6–0.5.9, 12 with a
    warning from 0.5.12 (0.5.14+: steps := draft // topk); the overlap scheduler forced off up to 0.5.12; topk > 1 with
    page_size > 1 needs flashinfer up to 0.5.12. [0.5.6 server_args.py:1828-1867], [0.5.14 speculative_hook.py:408-440],
    [0.5.23 :1285-1371]"""
    rule_max_running_requests(launch)
    if launch.get("enable_dp_attention"):
        text = "Currently ngram speculative decoding does not support dp attention."
        launch.error(
            "ngram-dp-attention",
            f"--speculative-algorithm NGRAM cannot run with --enable-dp-attention: SGLang raises at startup "
            f"('{text}'). Remove --enable-dp-attention.",
            ["speculative_algorithm", "enable_dp_attention"],
            f"ValueError: {text}",
        )
    legacy = not launch.at_least("0.5.14")
    log = "The overlap scheduler and mixed chunked prefill are disabled because of using ngram speculative decoding."
    if legacy:
        launch.adjust("disable_overlap_schedule", True, "NGRAM runs without the overlap scheduler", log)
    launch.adjust("enable_mixed_chunk", False, "NGRAM runs without mixed chunked prefill", log if legacy else None)
    breadth = launch.get("speculative_ngram_max_bfs_breadth")
    launch.adjust("speculative_eagle_topk", breadth, "NGRAM sets topk to --speculative-ngram-max-bfs-breadth")
    if launch.get("speculative_num_draft_tokens") is None:
        if not launch.at_least("0.5.12"):
            window = launch.get("speculative_ngram_max_match_window_size")
            launch.adjust("speculative_num_draft_tokens", window, "NGRAM default: the max match window size")
        else:
            launch.adjust(
                "speculative_num_draft_tokens",
                12,
                "NGRAM default draft tokens",
                "speculative_num_draft_tokens is set to 12 by default for ngram speculative decoding. "
                "You can override this by explicitly setting --speculative-num-draft-tokens.",
            )
    if not legacy and launch.get("speculative_num_steps") is None and breadth:
        launch.adjust(
            "speculative_num_steps",
            launch.get("speculative_num_draft_tokens") // breadth,
            "NGRAM default steps: draft tokens // topk",
        )
    topk, page_size, backend = breadth, launch.get("page_size") or 1, launch.get("attention_backend")
    if legacy and topk and topk > 1 and page_size > 1 and backend != "flashinfer":
        text = (
            f"speculative_eagle_topk({topk}) > 1 with page_size({page_size}) > 1 is unstable and produces "
            "incorrect results for paged attention backends. This combination is only supported for the "
            "'flashinfer' backend."
        )
        launch.error(
            "paged-tree",
            f"NGRAM with --speculative-ngram-max-bfs-breadth {topk} and --page-size {page_size} needs "
            f"--attention-backend flashinfer in SGLang {launch.version}; SGLang refuses to start. Set --page-size 1 "
            "or --attention-backend flashinfer.",
            ["speculative_ngram_max_bfs_breadth", "page_size", "attention_backend"],
            f"ValueError: {text}",
        )
    launch.report.overlap_schedule = not launch.get("disable_overlap_schedule")
    launch.report.spec_v2 = spec_v2_worker(launch.version, "NGRAM", launch.report.overlap_schedule)


def rule_pipeline_parallel(launch: _Launch) -> None:
    """0.5.6–0.5.12: pipeline parallelism asserts that no speculative algorithm is set.
    [0.5.6 server_args.py:4085-4091], [0.5.9 :5136-5141], [0.5.12 :7250-7253]"""
    if launch.at_least("0.5.14") or (launch.get("pp_size") or 1) <= 1:
        return
    text = (
        "Pipeline parallelism is not compatible with overlap schedule, speculative decoding, mixed chunked prefill."
        if not launch.at_least("0.5.12")
        else "Pipeline parallelism is not compatible with overlap schedule, speculative decoding"
    )
    launch.error(
        "pipeline-parallel-spec",
        f"--pp-size {launch.get('pp_size')} with --speculative-algorithm: SGLang {launch.version} cannot combine "
        "pipeline parallelism with speculative decoding and refuses to start. Use --pp-size 1 (tensor parallel "
        "instead) or remove speculative decoding.",
        ["pp_size", "speculative_algorithm"],
        f"AssertionError: {text}",
    )


def rule_spec_flags_without_algorithm(launch: _Launch) -> None:
    """All versions: speculative flags do nothing without `--speculative-algorithm` (SGLang ignores them)."""
    ignored = sorted(d for d in launch.explicit if d.startswith("speculative_") and d != "speculative_algorithm")
    if ignored:
        launch.warn(
            "spec-flags-ignored",
            f"{', '.join(launch.flag(d) for d in ignored)} have no effect without --speculative-algorithm; "
            "add --speculative-algorithm EAGLE (or EAGLE3, NEXTN, ...) or remove them.",
            ignored,
        )


def rule_deprecated_flags(launch: _Launch, argv: Sequence[str]) -> None:
    """Deprecated spellings still work but print a warning: 0.5.9-0.5.12 "The command line argument '<flag>' is
    deprecated and will be removed in future versions." [0.5.9 server_args.py:5729-5738]; 0.5.14+ "'<flag>' is
    deprecated and will be removed in a future release. Use '<new>' instead." [0.5.14 arg_groups/argparse_actions.py]
    (the replacement flag is not in our tables, so the log line stops before it)."""
    for token in argv:
        head = token.partition("=")[0]
        spec = launch.table.lookup(head) if token.startswith("--") else None
        if spec is None or not spec.deprecated:
            continue
        matched = head if head in launch.table.by_option else launch.table.prefix_matches(head)[0]
        log = (
            f"'{matched}' is deprecated and will be removed in a future release."
            if launch.at_least("0.5.14")
            else f"The command line argument '{matched}' is deprecated and will be removed in future versions."
        )
        launch.warn(
            "deprecated-flag",
            f"{matched} is deprecated in SGLang {launch.version} and will be removed; see --help for its replacement.",
            [spec.dest],
            log,
        )


def rule_nodes_divide_parallelism(launch: _Launch) -> None:
    """All versions: TP × PP must split evenly over the nodes [0.5.23 arg_groups/validation_hook.py:179-181]."""
    nnodes = launch.get("nnodes") or 1
    world = (launch.get("tp_size") or 1) * (launch.get("pp_size") or 1)
    if nnodes > 1 and world % nnodes:
        launch.error(
            "nnodes-divides-tp",
            f"--tp-size × --pp-size ({world}) must be a multiple of --nnodes ({nnodes}): every node runs the same "
            "number of GPUs. Change --tp-size or --nnodes.",
            ["tp_size", "nnodes"],
            "AssertionError: tp_size must be divisible by number of nodes",
        )


def rule_pd_fake_backend(launch: _Launch) -> None:
    """All versions with PD: the `fake` transfer backend moves no KV and exists for decode benchmarks only; a
    prefill server asserts against it [0.5.23 arg_groups/pd_disaggregation_hook.py:145-149]."""
    if launch.get("disaggregation_mode") == "prefill" and launch.get("disaggregation_transfer_backend") == "fake":
        launch.error(
            "pd-fake-prefill",
            "--disaggregation-transfer-backend fake is for decode servers only (synthetic decode benchmarks); a "
            "prefill server refuses it. Use mooncake (the default) or nixl on both sides of the pair.",
            ["disaggregation_transfer_backend", "disaggregation_mode"],
            "AssertionError: Prefill server does not support 'fake' as the transfer backend",
        )


# ---------------------------------------------------------------------------------------------------------


def check_launch(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    version: str | None = None,
    *,
    architecture: str | None = None,
    adaptive_config: Mapping[str, Any] | None = None,
) -> CheckReport:
    """Say what SGLang `version` (None = newest supported) would do at startup with these launch flags
    (no launcher, none of its own options: `Launch.flags`) and environment. `architecture` is the target's HF
    `config.architectures[0]`, used by the auto-choice of the speculative triple; guessed from the model
    path when omitted. `adaptive_config`: the JSON of the unit's `--speculative-adaptive-config` file where the
    caller read it (else its candidate steps go unchecked, with a warning). Raises UnsupportedVersionError for a
    version older than the oldest supported one."""
    table = flag_table(version)
    parsed = parse_argv(list(argv), table)
    launch = _Launch(table, parsed.values, set(parsed.explicit), dict(env or {}))
    launch.adaptive_config = adaptive_config
    launch.report.explicit = frozenset(parsed.explicit)
    for problem in parsed.problems:
        _argv_error(launch, problem)
    rule_deprecated_flags(launch, argv)
    rule_nodes_divide_parallelism(launch)
    rule_pd_fake_backend(launch)
    guessed = _architecture(launch, architecture)
    _run_speculative_rules(launch, guessed)
    _run_start_rules(launch, guessed)
    launch.report.resolved = dict(launch.values)
    return launch.report


def _run_speculative_rules(launch: _Launch, architecture: str | None) -> None:
    rule_algorithm_name(launch)
    rule_nextn_is_eagle(launch)
    rule_draft_window_size(launch)
    rule_skip_dp_mlp_sync(launch)
    algorithm = launch.get("speculative_algorithm")
    if algorithm is None:
        rule_spec_flags_without_algorithm(launch)
        return
    rule_pipeline_parallel(launch)
    if algorithm == "NGRAM":
        rule_ngram(launch)
        return
    if algorithm in _NEW_DRAFT_RULES and launch.at_least("0.5.23"):
        _NEW_DRAFT_RULES[algorithm](launch)
        return
    if algorithm not in EAGLE_FAMILY:
        return  # FROZEN_KV_MTP, DFLASH before 0.5.23: outside what the console tunes
    eagle_rules: tuple[Callable[[_Launch], None], ...] = (
        rule_standalone_dp_attention,
        rule_max_running_requests,
        rule_overlap_and_spec_v2,
        rule_mixed_chunk_off,
    )
    for rule in eagle_rules:
        rule(launch)
    if not rule_adaptive(launch):
        rule_spec_triple(launch, architecture)
    if any(f.code in ("spec-params-partial", "adaptive-steps") for f in launch.report.errors):
        return
    for rule in (
        rule_trtllm_mha_topk,
        rule_mla_backends_topk,
        rule_rejection_sampling,
        rule_chain_draft_tokens,
        rule_paged_tree,
        rule_tree_capacity,
        rule_spec_v2_auto_topk,
    ):
        rule(launch)


def rule_spec_v2_auto_topk(launch: _Launch) -> None:
    """0.5.9–0.5.12: the spec-v2 topk check runs *before* the auto-choice, so an unset topk that auto-resolves
    to 4 (Llama, Grok) is not refused at startup although spec v2 supports only topk 1 [0.5.9 server_args.py:
    2368-2389; docs "Speculative Decoding V2" tell users to set topk 1 explicitly]. Warning."""
    if not launch.at_least("0.5.9") or launch.at_least("0.5.14"):
        return
    topk = launch.get("speculative_eagle_topk")
    if launch.report.overlap_schedule and "speculative_eagle_topk" not in launch.explicit and topk and topk > 1:
        launch.warn(
            "spec-v2-auto-topk",
            f"Spec v2 is on and the auto-chosen --speculative-eagle-topk is {topk}, which spec v2 does not support "
            f"in SGLang {launch.version}; startup does not catch it. Set --speculative-eagle-topk 1 explicitly.",
            ["speculative_eagle_topk"],
        )


# ---------------------------------------------------------------------------------------------------------
# 0.5.23's new drafts: DFLASH, DSPARK, UNO [0.5.23 arg_groups/speculative_hook.py:287-850]. Each has its own fields
# and fixes the EAGLE triple itself (one step, topk 1, a verify window of its own).


def _one_step_topk_one(launch: _Launch, name: str, label: str) -> None:
    steps = launch.get("speculative_num_steps")
    if steps is None:
        launch.adjust("speculative_num_steps", 1, f"{name} runs one step")
    elif int(steps) != 1:
        launch.adjust(
            "speculative_num_steps",
            1,
            f"{name} runs one step: --speculative-num-steps {steps} is overridden to 1",
            f"{label} only supports speculative_num_steps == 1; overriding speculative_num_steps={steps} to 1.",
        )
    if launch.get("speculative_eagle_topk") is None:
        launch.adjust("speculative_eagle_topk", 1, f"{name} runs topk 1")


def rule_dflash(launch: _Launch) -> None:
    """DFLASH: a block-diffusion draft (needs --speculative-draft-model-path), pp 1, with DP attention only with
    --enable-dp-lm-head; steps := 1, topk := 1; the verify window (draft tokens) is --speculative-dflash-block-size,
    else the draft config's, else 16. [0.5.23 speculative_hook.py:287-434]"""
    if launch.get("enable_dp_attention") and not launch.get("enable_dp_lm_head"):
        text = "DFLASH with dp attention requires --enable-dp-lm-head."
        launch.error("dflash-dp-lm-head", text, ["enable_dp_attention", "enable_dp_lm_head"], f"ValueError: {text}")
    if int(launch.get("pp_size") or 1) != 1:
        text = "Currently DFLASH speculative decoding only supports pp_size == 1."
        launch.error("dflash-pp", text, ["pp_size"], f"ValueError: {text}")
    if launch.get("speculative_draft_model_path") is None:
        text = "DFLASH speculative decoding requires setting --speculative-draft-model-path."
        launch.error("dflash-draft", text, ["speculative_draft_model_path"], f"ValueError: {text}")
        return
    _one_step_topk_one(launch, "DFLASH", "DFLASH")
    block = launch.get("speculative_dflash_block_size")
    if block is not None:
        launch.adjust("speculative_num_draft_tokens", int(block), "DFLASH's verify window is its block size")
    elif launch.get("speculative_num_draft_tokens") is None:
        launch.warn(
            "dflash-block-size",
            "the verify window comes from the draft's config (block_size), else 16: set "
            "--speculative-dflash-block-size to know it before the start",
            ["speculative_dflash_block_size"],
        )


def rule_dspark(launch: _Launch) -> None:
    """DSPARK: steps := 1, topk := 1; draft tokens = gamma + 1 with gamma = --speculative-dspark-block-size (else the
    draft config's, else 7); an explicit --speculative-num-draft-tokens must equal gamma + 1; pipeline parallelism
    only on a PD prefill; DP attention needs --enable-dp-lm-head. [0.5.23 speculative_hook.py:660-850;
    dspark_components/dspark_config.py:21]"""
    if launch.get("enable_dp_attention") and not launch.get("enable_dp_lm_head"):
        text = "DSpark with dp attention requires --enable-dp-lm-head."
        launch.error("dspark-dp-lm-head", text, ["enable_dp_attention", "enable_dp_lm_head"], f"ValueError: {text}")
    if int(launch.get("pp_size") or 1) != 1 and launch.get("disaggregation_mode") != "prefill":
        text = (
            "DSpark pipeline parallelism requires PD prefill; decode and non-disaggregated serving require "
            "pp_size == 1."
        )
        launch.error("dspark-pp", text, ["pp_size", "disaggregation_mode"], f"ValueError: {text}")
    _one_step_topk_one(launch, "DSPARK", "DSpark")
    gamma = launch.get("speculative_dspark_block_size")
    if gamma is None:
        return  # the draft's config says (else 7): known only where the draft is
    window = int(gamma) + 1
    given = launch.get("speculative_num_draft_tokens")
    if given is not None and int(given) != window:
        text = (
            f"DSpark speculative_num_draft_tokens must equal gamma + 1 (= {window} for gamma={gamma}), but got "
            f"speculative_num_draft_tokens={given}."
        )
        launch.error(
            "dspark-window", text, ["speculative_num_draft_tokens", "speculative_dspark_block_size"],
            f"ValueError: {text}",
        )  # fmt: skip
        return
    if window < 2:
        text = f"DSpark speculative_num_draft_tokens must be >= 2 (= gamma + 1), got {window}."
        launch.error("dspark-window", text, ["speculative_dspark_block_size"], f"ValueError: {text}")
        return
    launch.adjust("speculative_num_draft_tokens", window, "DSpark's verify window is gamma + 1")


def rule_uno(launch: _Launch) -> None:
    """UNO: the target itself drafts through a LoRA (--uno-lora-path, no draft model), TP = PP = 1, no DP attention,
    no LoRA serving. [0.5.23 speculative_hook.py:449-612]"""
    checks = (
        (launch.get("speculative_draft_model_path") is not None, "uno-draft", ["speculative_draft_model_path"],
         "UNO reuses the target model and does not accept --speculative-draft-model-path."),
        (launch.get("uno_lora_path") is None, "uno-lora", ["uno_lora_path"], "UNO requires --uno-lora-path."),
        ((int(launch.get("tp_size") or 1), int(launch.get("pp_size") or 1)) != (1, 1), "uno-parallel",
         ["tp_size", "pp_size"], "UNO requires TP=PP=1."),
        (bool(launch.get("enable_dp_attention")), "uno-dp-attention", ["enable_dp_attention"],
         "UNO does not support DP attention or context parallelism."),
        (bool(launch.get("enable_lora") or launch.get("lora_paths")), "uno-lora-serving", ["enable_lora"],
         "UNO does not support public Multi-LoRA serving."),
    )  # fmt: skip
    for failed, code, flags, text in checks:
        if failed:
            launch.error(code, text, flags, f"ValueError: {text}")
            return


_NEW_DRAFT_RULES: Mapping[str, Callable[[_Launch], None]] = {
    "DFLASH": rule_dflash,
    "DSPARK": rule_dspark,
    "UNO": rule_uno,
}


# ---------------------------------------------------------------------------------------------------------
# The options that shorten a start (wave5-facts §6): what SGLang refuses of them and what they cannot do. Each exists
# only in the releases whose flag table has it (a flag a release lacks is an unknown flag, refused by the parser).

_OVERLAP_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM")
_OVERLAP_DTYPES = ("auto", "half", "float16", "bfloat16")
# Where a cache dir does not outlive a reboot (and /tmp not even a restart of a unit with PrivateTmp=yes).
_VOLATILE_DIRS = ("/tmp", "/var/tmp/systemd-private", "/dev/shm", "/run")


def _run_start_rules(launch: _Launch, architecture: str | None) -> None:
    rule_weight_cache(launch)
    rule_startup_overlap(launch, architecture)
    rule_loader_extra_config(launch)
    rule_prefetch_checkpoints(launch)
    rule_cache_dir(launch)


def _overlap_refusal(launch: _Launch, architecture: str | None) -> tuple[str, tuple[str, ...]] | None:
    """Why `--startup-weight-load-mode overlap` is refused, as SGLang says it (the first of its checks that fails, in
    its order), with the flags behind it; None where nothing the launch says refuses it. Checks the console cannot
    make (the checkpoint's own dtype, quantization and architecture where not given) are left to the start.
    [0.5.23 model_runner_components/startup_weight_load.py:327-430; StartupWeightLoadOptions :100-140]"""
    get = launch.get
    backends = [get("cuda_graph_backend_decode"), get("cuda_graph_backend_prefill")]
    graphs_off = bool(get("disable_cuda_graph")) or (
        (bool(get("disable_decode_cuda_graph")) or backends[0] == "disabled")
        and (bool(get("disable_prefill_cuda_graph")) or backends[1] == "disabled")
    )
    dp = max(int(get("dp_size") or 1), int(get("attn_dp_size") or 1))
    basic: tuple[tuple[bool, str, tuple[str, ...]], ...] = (
        (get("device") not in (None, "cuda"), "CUDA only", ("device",)),
        (graphs_off, "CUDA graph capture is disabled", ("disable_cuda_graph",)),
        (get("load_format") not in (None, "auto", "safetensors"), "load format must be auto or safetensors",
         ("load_format",)),
        (get("speculative_algorithm") is not None, "speculative decoding is not supported", ("speculative_algorithm",)),
        (int(get("tp_size") or 1) not in (1, 2), "only TP1 and TP2 are supported", ("tp_size",)),
        (int(get("attn_cp_size") or 1) != 1, "attention context parallelism is not supported", ("attn_cp_size",)),
        (int(get("dcp_size") or 1) != 1, "decode context parallelism is not supported", ("dcp_size",)),
        (int(get("pp_size") or 1) != 1, "pipeline parallelism is not supported", ("pp_size",)),
        (dp != 1, "data parallelism is not supported", ("dp_size",)),
        (int(get("ep_size") or 1) != 1, "expert parallelism is not supported", ("ep_size",)),
        (float(get("cpu_offload_gb") or 0) > 0, "CPU offload is not supported", ("cpu_offload_gb",)),
        (int(get("offload_group_size") or -1) > 0, "layer-group offloading is not supported", ("offload_group_size",)),
        (bool(get("enable_memory_saver")), "memory saver is not supported", ("enable_memory_saver",)),
        (bool(get("enable_weights_cpu_backup")), "CPU weight backup is not supported", ("enable_weights_cpu_backup",)),
        (bool(get("enable_lora") or get("lora_paths")), "LoRA is not supported", ("enable_lora",)),
        (bool(get("weight_loader_disable_mmap")), "safetensors mmap must be enabled", ("weight_loader_disable_mmap",)),
        (bool(get("weight_loader_drop_cache_after_load")), "dropping the page cache during load is not supported",
         ("weight_loader_drop_cache_after_load",)),
        (bool(get("custom_weight_loader")), "custom weight loaders are not supported", ("custom_weight_loader",)),
        (bool(get("enable_torch_compile")), "torch.compile is not supported", ("enable_torch_compile",)),
        (get("dtype") not in (None, *_OVERLAP_DTYPES), "FP16 or BF16 only", ("dtype",)),
        (get("quantization") not in (None, "unquant"), "quantization is not supported", ("quantization",)),
        (architecture is not None and architecture not in _OVERLAP_ARCHITECTURES,
         "model architecture is not in the startup-overlap allowlist", ("model_path",)),
    )  # fmt: skip
    return next(((reason, dests) for refused, reason, dests in basic if refused), None)


def rule_startup_overlap(launch: _Launch, architecture: str | None) -> None:
    """0.5.23: `--startup-weight-load-mode overlap` captures the CUDA graphs while the checkpoint is staged and commits
    the weights after: a start as long as the longer of the two instead of both. Only for an allowlist; anything else
    fails the start with ValueError "--startup-weight-load-mode=overlap is not supported: <reason>".
    [0.5.23 startup_weight_load.py:298-318, 327-430; wave5 §6]"""
    if launch.get("startup_weight_load_mode") != "overlap":
        return
    refusal = _overlap_refusal(launch, architecture)
    if refusal is None:
        return
    reason, dests = refusal
    text = f"--startup-weight-load-mode=overlap is not supported: {reason}"
    launch.error(
        "startup-overlap-unsupported",
        f"{text}. SGLang {launch.version} fails the start; the overlap is only for an unquantized FP16/BF16 Llama, "
        "Qwen2 or Qwen3 on one or two GPUs without speculative decoding. Use --startup-weight-load-mode serial.",
        ["startup_weight_load_mode", *dests],
        f"ValueError: {text}",
    )


def rule_weight_cache(launch: _Launch) -> None:
    """0.5.17+: `--weight-cache-mode client` maps the weights from a standalone daemon over CUDA IPC instead of
    reading them from disk. With speculative decoding SGLang refuses it at startup (the daemon does not export the
    draft's weights) [0.5.23 arg_groups/model_path_hook.py:278-287; 0.5.17 server_args.py:7323-7332]; only unquantized
    or block-wise FP8 weights are shared (any other --quantization fails the load) [0.5.23 weight_cache/protocol.py:
    162-199]; `daemon` mode starts a daemon with the engine and ends it with the engine, so a restart is no faster
    [0.5.23 fields/model.py:377-390]."""
    mode = launch.get("weight_cache_mode")
    if mode in (None, "off"):
        return
    if launch.get("speculative_algorithm") is not None:
        text = (
            "--weight-cache-mode is not supported together with speculative decoding (--speculative-algorithm): the "
            "weight cache daemon does not export the draft model's weights. Disable one of them (--weight-cache-mode "
            "off) for this configuration."
        )
        launch.error(
            "weight-cache-speculative",
            f"--weight-cache-mode {mode} with speculative decoding: SGLang {launch.version} refuses to start (the "
            "weight-cache daemon does not export the draft model's weights). Use --weight-cache-mode off, or run "
            "without --speculative-algorithm.",
            ["weight_cache_mode", "speculative_algorithm"],
            f"ValueError: {text}",
        )
        return
    quantization = launch.get("quantization")
    if quantization not in (None, "unquant", "fp8"):
        text = (
            f"[weight_cache:client] quantization method {quantization!r} is not verified for CUDA IPC zero-copy weight "
            "sharing. Its process_weights_after_loading may stamp Python-side metadata (e.g. format_ue8m0) or "
            "repack/transpose weights into shapes the meta-initialized client cannot reproduce, which would silently "
            "serve wrong-numerics weights. Verified methods: '' (unquantized), 'fp8'. Note: FP8 is only verified for "
            "block-wise configs (weight_block_size set), not per-tensor FP8. Disable the weight cache "
            "(--weight-cache-mode off) for this model."
        )
        launch.error(
            "weight-cache-quantization",
            f"--weight-cache-mode {mode} with --quantization {quantization}: SGLang {launch.version} shares only "
            "unquantized or block-wise FP8 weights and fails the load. Use --weight-cache-mode off for this model.",
            ["weight_cache_mode", "quantization"],
            f"sglang.srt.weight_cache.protocol.UnsupportedQuantForIPCError: {text}",
        )
        return
    if mode == "daemon":
        launch.warn(
            "weight-cache-daemon",
            "--weight-cache-mode daemon starts the weight-cache daemon with the engine and stops it with the engine: "
            "a restart is no faster (the first start is slower). For faster restarts run the standalone daemon "
            "(python -m sglang.srt.weight_cache.daemon --model-path MODEL --tp-size N) as a service of its own and "
            "use --weight-cache-mode client.",
            ["weight_cache_mode"],
        )


def rule_loader_extra_config(launch: _Launch) -> None:
    """All versions: `--model-loader-extra-config` is read as a JSON object at startup (LoadConfig, orjson.loads:
    [0.5.23 configs/load_config.py:137]); presharded takes presharded_path and draft_presharded_path from it. Not
    JSON: the start fails (orjson words the detail its own way)."""
    import json

    text = launch.get("model_loader_extra_config")
    if not isinstance(text, str) or text.strip() in ("", "{}"):
        return
    try:
        value = json.loads(text)
    except ValueError as exc:
        launch.error(
            "loader-extra-config-json",
            f"--model-loader-extra-config is not JSON ({exc}): SGLang {launch.version} fails the start reading it. "
            'Write a JSON object, e.g. \'{"presharded_path": "/srv/presharded"}\'.',
            ["model_loader_extra_config"],
            f"orjson.JSONDecodeError: {exc}",
        )
        return
    if not isinstance(value, dict):
        launch.error(
            "loader-extra-config-json",
            f"--model-loader-extra-config must be a JSON object, not {type(value).__name__}: the loader reads its "
            'keys. Write it as {"key": value, ...}.',
            ["model_loader_extra_config"],
            None,
        )


def loader_extra_config(launch_values: Mapping[str, Any]) -> dict[str, Any]:
    """--model-loader-extra-config as the loader reads it ({} where unset or not a JSON object)."""
    import json

    text = launch_values.get("model_loader_extra_config")
    try:
        value = json.loads(text) if isinstance(text, str) and text.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def rule_prefetch_checkpoints(launch: _Launch) -> None:
    """0.5.12+: `--weight-loader-prefetch-checkpoints` has each rank read a share of the checkpoint into the page
    cache (network storage: read once instead of once per rank), and turns multi-threaded safetensors loading off
    unless the loader's extra config sets enable_multithread_load=true [0.5.23 fields/model.py:303-309]: on local
    NVMe, where prefetch does nothing, the start gets slower."""
    if not launch.get("weight_loader_prefetch_checkpoints"):
        return
    if loader_extra_config(launch.values).get("enable_multithread_load") is True:
        return
    launch.warn(
        "prefetch-single-thread",
        "--weight-loader-prefetch-checkpoints turns multi-threaded safetensors loading off: it shortens a start where "
        "the checkpoint is on network storage (NFS, Lustre), and lengthens one on local NVMe, where prefetch does "
        'nothing. There, add "enable_multithread_load": true to --model-loader-extra-config or leave it off.',
        ["weight_loader_prefetch_checkpoints", "model_loader_extra_config"],
    )


def rule_cache_dir(launch: _Launch) -> None:
    """0.5.23: `import sglang` points the Triton, Inductor, CUDA, TileLang and FlashInfer caches under
    $SGLANG_CACHE_DIR (default ~/.cache/sglang), with DeepGEMM's JIT and FlashInfer's autotune results; kept, the next
    start compiles nothing again [0.5.23 srt/environ.py:1383, 2308-2336; sglang/__init__.py:10-14]. A folder that
    does not outlive a reboot (/tmp, /dev/shm, /run; /tmp not even a restart with PrivateTmp=yes) keeps nothing."""
    path = launch.env.get(CACHE_DIR_ENV)
    if path is None or not launch.at_least("0.5.23"):
        return
    volatile = next((d for d in _VOLATILE_DIRS if path == d or path.startswith(d + "/")), None)
    if volatile is not None:
        launch.warn(
            "cache-dir-volatile",
            f"{CACHE_DIR_ENV}={path} is under {volatile}, which does not outlive a reboot (nor, for /tmp, a restart "
            "of a unit with PrivateTmp=yes): each such start compiles its kernels again. Use a persistent folder of "
            "this host, e.g. /var/cache/sglang.",
            [CACHE_DIR_ENV],
        )
