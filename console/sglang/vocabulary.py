"""The speculative and serving settings the console talks about, in one table (pure, stdlib only).

Every list of settings elsewhere (what the dashboard shows, what a restart checks, what a snapshot records,
what drift watches, the editor's fields, a benchmark record's first keys, ...) is a `View` of this table,
drawn from it by `dests(view)` or `terms(view)`: add a setting, or show one somewhere else, by changing its row.

    dests(View.DRIFT)        -> ("speculative_algorithm", "speculative_num_steps", ..., "version")
    term("max_running_requests").label == "max running requests"; .name == "max running"
    flag_of("speculative_num_steps") == "--speculative-num-steps"

A view lists its settings in the table's order, except where `_OUT_OF_ORDER` says otherwise: those are the
orders operators have seen in that place since it was first shown (check-args' report, snapshot files,
benchmark records), kept so that nothing they read moves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

Group = Literal["speculative", "serving", "faster restarts", "identity"]

# The environment variable that asks SGLang up to 0.5.12 for the spec-v2 (overlap) worker.
SPEC_V2_ENV = "SGLANG_ENABLE_SPEC_V2"
# Where SGLang 0.5.23 keeps its compiled kernels (Triton, Inductor, DeepGEMM, FlashInfer; default ~/.cache/sglang).
CACHE_DIR_ENV = "SGLANG_CACHE_DIR"

# SGLang's own renamings, on every version: a value a unit may ask that SGLang runs under another name by design
# (NEXTN, MTP, is the EAGLE worker: rules.rule_nextn_is_eagle). The same setup under two names, never a drift.
ALIASES: Mapping[str, Mapping[str, str]] = {"speculative_algorithm": {"NEXTN": "EAGLE"}}


def runs_as(dest: str, asked: Any) -> str | None:
    """The name SGLang runs `asked` under when it is one of its aliases (`NEXTN` -> `EAGLE`), else None."""
    return ALIASES.get(dest, {}).get(asked) if isinstance(asked, str) else None


class View(StrEnum):
    """A place that lists settings; each row of the table says in which places it appears."""

    DRAFT_TREE = "draft tree"  # the three numbers that shape the draft tree (sglang/rules.py)
    TUNE_CONFIG = "tune config"  # what a tune's setup is described by (core/tune/space.py: Candidate.config)
    SPECULATIVE = "speculative"  # the speculative setup /server_info reports (sglang/client.py, core/snapshot/model.py)
    RESTART_CHECK = (
        "restart check"  # what a restart without edits checks the server still resolves (core/change/plan.py)
    )
    DASHBOARD = "dashboard"  # the setup the dashboard shows beside the unit's values (core/status/monitor.py)
    DRIFT = "drift"  # what status compares with the production snapshot (core/snapshot/drift.py)
    SNAPSHOT = "snapshot"  # the resolved values a snapshot records and shows first (core/snapshot/model.py)
    CHECK_ARGS = "check-args"  # shown in check-args' report even when not set (cli/check_args.py)
    EDITOR = "editor"  # the parameter editor's fields (core/apply/edit.py)
    RECORD = "record"  # a benchmark record's server args, shown first (bench/records.py)
    RUN_SETUP = "run setup"  # a run's setup in the side-by-side comparison (bench/sidebyside.py)


@dataclass(frozen=True, slots=True)
class Term:
    """One setting: how SGLang names it, how the unit sets it, how people read it, and where it is shown."""

    dest: str  # SGLang's ServerArgs name: the key in /server_info and in the rules' resolved values
    flag: str | None  # the launch option that sets it; None when none does (an environment variable, the version)
    label: str  # the editor's field and the silent changes: "max running requests"
    name: str  # in one line (drift, a setup's description): "max running"
    group: Group  # the editor's sections; identity = what runs (model, SGLang version), not how
    views: frozenset[View]
    letter: str | None = None  # in a setup's short form: `eagle3 s2 k1 d3 v2`
    env: str | None = None  # the environment variable that sets it, for a setting that is one
    last_version: str | None = None  # the last supported release with the flag (or variable); None: every one
    first_version: str | None = None  # the first supported release with it; None: every one


def _term(
    dest: str,
    flag: str | None,
    label: str,
    group: Group,
    views: Iterable[View],
    *,
    name: str | None = None,
    letter: str | None = None,
    env: str | None = None,
    last_version: str | None = None,
    first_version: str | None = None,
) -> Term:
    return Term(dest, flag, label, name or label, group, frozenset(views), letter, env, last_version, first_version)


V = View
# fmt: off
TERMS: tuple[Term, ...] = (
    # --- speculative decoding ---
    _term(
        "speculative_algorithm", "--speculative-algorithm", "algorithm", "speculative",
        (V.TUNE_CONFIG, V.SPECULATIVE, V.RESTART_CHECK, V.DASHBOARD, V.DRIFT, V.SNAPSHOT, V.CHECK_ARGS, V.EDITOR,
         V.RECORD, V.RUN_SETUP),
    ),
    _term(
        "speculative_num_steps", "--speculative-num-steps", "steps", "speculative",
        (V.DRAFT_TREE, V.TUNE_CONFIG, V.SPECULATIVE, V.RESTART_CHECK, V.DASHBOARD, V.DRIFT, V.SNAPSHOT, V.CHECK_ARGS,
         V.EDITOR, V.RECORD, V.RUN_SETUP),
        letter="s",
    ),
    _term(
        "speculative_eagle_topk", "--speculative-eagle-topk", "topk", "speculative",
        (V.DRAFT_TREE, V.TUNE_CONFIG, V.SPECULATIVE, V.RESTART_CHECK, V.DASHBOARD, V.DRIFT, V.SNAPSHOT, V.CHECK_ARGS,
         V.EDITOR, V.RECORD, V.RUN_SETUP),
        letter="k",
    ),
    _term(
        "speculative_num_draft_tokens", "--speculative-num-draft-tokens", "draft tokens", "speculative",
        (V.DRAFT_TREE, V.TUNE_CONFIG, V.SPECULATIVE, V.RESTART_CHECK, V.DASHBOARD, V.DRIFT, V.SNAPSHOT, V.CHECK_ARGS,
         V.EDITOR, V.RECORD, V.RUN_SETUP),
        letter="d",
    ),
    _term(
        f"env:{SPEC_V2_ENV}", None, f"spec v2 ({SPEC_V2_ENV})", "speculative", (V.EDITOR,),
        name="spec v2", env=SPEC_V2_ENV, last_version="0.5.12",  # 0.5.14 no longer reads it
    ),
    _term(
        "disable_overlap_schedule", "--disable-overlap-schedule", "overlap", "speculative",
        (V.TUNE_CONFIG, V.SPECULATIVE, V.RESTART_CHECK, V.DASHBOARD, V.DRIFT, V.SNAPSHOT, V.CHECK_ARGS, V.RECORD,
         V.RUN_SETUP),
    ),
    _term(
        "speculative_draft_model_path", "--speculative-draft-model-path", "draft model path", "speculative",
        (V.SPECULATIVE, V.DASHBOARD, V.DRIFT, V.SNAPSHOT, V.EDITOR, V.RECORD, V.RUN_SETUP),
        name="draft model",
    ),
    # 0.5.23's own: adaptive steps (per-batch-size tiers from a JSON file) and the new drafts' fields
    _term(
        "speculative_adaptive", "--speculative-adaptive", "adaptive steps", "speculative", (V.EDITOR,),
        name="adaptive", first_version="0.5.12",
    ),
    _term(
        "speculative_adaptive_config", "--speculative-adaptive-config", "adaptive config (JSON file)", "speculative",
        (V.EDITOR,), name="adaptive config", first_version="0.5.12",
    ),
    _term(
        "speculative_dflash_block_size", "--speculative-dflash-block-size", "DFLASH block size", "speculative",
        (V.EDITOR,), name="dflash block", first_version="0.5.12",
    ),
    _term(
        "speculative_dspark_block_size", "--speculative-dspark-block-size", "DSPARK gamma (block size)", "speculative",
        (V.EDITOR,), name="dspark gamma", first_version="0.5.17",
    ),
    _term("uno_lora_path", "--uno-lora-path", "UNO LoRA path", "speculative", (V.EDITOR,), first_version="0.5.23"),
    # --- serving ---
    _term(
        "max_running_requests", "--max-running-requests", "max running requests", "serving",
        (V.RESTART_CHECK, V.DASHBOARD, V.DRIFT, V.SNAPSHOT, V.CHECK_ARGS, V.EDITOR, V.RECORD),
        name="max running",
    ),
    _term("mem_fraction_static", "--mem-fraction-static", "mem fraction static", "serving", (V.EDITOR,)),
    _term(
        "cuda_graph_max_bs", "--cuda-graph-max-bs", "CUDA graph max batch size", "serving", (V.EDITOR, V.RECORD),
        last_version="0.5.12",  # 0.5.14 splits it into decode and prefill (--cuda-graph-max-bs is decode's alias)
    ),
    _term("chunked_prefill_size", "--chunked-prefill-size", "chunked prefill size", "serving", (V.EDITOR,)),
    _term("attention_backend", "--attention-backend", "attention backend", "serving", (V.CHECK_ARGS, V.EDITOR)),
    _term("page_size", "--page-size", "page size", "serving", (V.CHECK_ARGS,)),
    _term("tp_size", "--tp-size", "tensor parallel (tp)", "serving", (V.CHECK_ARGS, V.EDITOR)),
    _term(
        # the editor offers it only up to 0.5.10: 0.5.11 records the histograms always (the flag a deprecated no-op)
        "collect_tokens_histogram", "--collect-tokens-histogram", "token length histograms", "serving", (V.EDITOR,),
        last_version="0.5.17",  # gone from 0.5.23
    ),
    _term(
        "uvicorn_access_log_exclude_prefixes", "--uvicorn-access-log-exclude-prefixes", "access log: skip paths",
        "serving", (V.EDITOR,), name="access log skips", first_version="0.5.9",  # a list: paths the log leaves out
    ),
    # --- what shortens a start (wave5 §6; the editor's group, each where the release has it) ---
    _term("load_format", "--load-format", "load format", "faster restarts", (V.EDITOR,)),
    _term(
        "model_loader_extra_config", "--model-loader-extra-config", "loader extra config (JSON)", "faster restarts",
        (V.EDITOR,), name="loader config",
    ),
    _term(
        "weight_loader_prefetch_checkpoints", "--weight-loader-prefetch-checkpoints", "prefetch checkpoints",
        "faster restarts", (V.EDITOR,), first_version="0.5.12",
    ),
    _term(
        "startup_weight_load_mode", "--startup-weight-load-mode", "weight load during graph capture",
        "faster restarts", (V.EDITOR,), name="weight load mode", first_version="0.5.23",
    ),
    _term(
        "weight_cache_mode", "--weight-cache-mode", "weight cache", "faster restarts", (V.EDITOR,),
        first_version="0.5.17",
    ),
    _term(
        "weight_cache_socket", "--weight-cache-socket", "weight cache socket", "faster restarts", (V.EDITOR,),
        first_version="0.5.17",
    ),
    _term(
        f"env:{CACHE_DIR_ENV}", None, f"compile cache dir ({CACHE_DIR_ENV})", "faster restarts", (V.EDITOR,),
        name="compile cache dir", env=CACHE_DIR_ENV, first_version="0.5.23",  # 0.5.23 moves every JIT cache under it
    ),
    # --- what runs ---
    _term("model_path", "--model-path", "model path", "identity", (V.DRIFT, V.SNAPSHOT), name="model"),
    _term("served_model_name", "--served-model-name", "served model name", "identity", (V.SNAPSHOT,)),
    _term("version", None, "SGLang version", "identity", (V.DRIFT,), name="SGLang"),
)
# fmt: on
del V

# (view, dest, the dest it comes right after): where a view's order is not the table's.
_OUT_OF_ORDER: tuple[tuple[View, str, str], ...] = (
    # /server_info's order (ServerArgs declares the draft model right after the algorithm)
    (View.SPECULATIVE, "speculative_draft_model_path", "speculative_algorithm"),
    (View.SNAPSHOT, "speculative_draft_model_path", "speculative_algorithm"),
    (View.CHECK_ARGS, "max_running_requests", "speculative_num_draft_tokens"),
    (View.RECORD, "speculative_draft_model_path", "speculative_num_draft_tokens"),
    (View.RUN_SETUP, "speculative_draft_model_path", "speculative_num_draft_tokens"),
)

_BY_DEST = {t.dest: t for t in TERMS}


def term(dest: str) -> Term:
    """The row of a setting; KeyError for a dest the table does not hold."""
    return _BY_DEST[dest]


def terms(view: View) -> tuple[Term, ...]:
    """The settings a view lists, in its order."""
    out = [t for t in TERMS if view in t.views]
    for moved_view, dest, after in _OUT_OF_ORDER:
        if moved_view is view:
            moved = out.pop(next(i for i, t in enumerate(out) if t.dest == dest))
            out.insert(next(i for i, t in enumerate(out) if t.dest == after) + 1, moved)
    return tuple(out)


def dests(view: View) -> tuple[str, ...]:
    """The dests a view lists, in its order."""
    return tuple(t.dest for t in terms(view))


def flag_of(dest: str) -> str:
    """The launch option that sets a setting; ValueError for one no flag sets."""
    flag = term(dest).flag
    if flag is None:
        raise ValueError(f"{dest} is not set by a launch flag")
    return flag


def setup_letters() -> tuple[tuple[str, str], ...]:
    """(letter, dest) for a setup's short form (`eagle3 s2 k1 d3`), in order."""
    return tuple((t.letter, t.dest) for t in TERMS if t.letter is not None)
