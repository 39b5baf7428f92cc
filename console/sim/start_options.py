"""What the options that shorten a start do to the stand-in's start (SGLang 0.5.23; wave5-facts §6), and the state
they keep between starts, as the real server keeps it on its host.

The model (each share is the profile's, console.sim.profiles.StartupPhases; none is measured on hardware):

- `--load-format presharded`: the first start with a parallelism + quantization loads as usual, then writes per-rank
  shards under `<model>/presharded/TP-<tp>-sig-<hash>/` (or the loader's `presharded_path`), a READY file last
  (model_loader/loader.py:1721-1830): that start's weight loading takes `1 + PRESHARD_DUMP_SHARE` of the profile's.
  A later start with the same shard config finds READY and loads the shards: its weight loading skips the
  post-processing (re-quantization, repacking), `requantize_share` of it. The stand-in writes the markers only.
  A model given by Hub id lives in the simulated host's Hub cache, `<state-dir>/hf-cache/models--ORG--NAME`.
- A compile cache: SGLang 0.5.23 keeps the Triton, Inductor, DeepGEMM and FlashInfer caches under
  $SGLANG_CACHE_DIR (srt/environ.py:2308-2336). The stand-in is a host whose default cache does not outlive the
  process (a container without a cache volume: sglang#29170 compiles DeepGEMM at every start there): without
  SGLANG_CACHE_DIR every start is cold and captures its graphs in the profile's time; with it, the first start of a
  model (its architecture, TP and release) leaves a marker there, and a start that finds it skips the JIT compiles,
  `capture_jit_share` of each capture.
- `--startup-weight-load-mode overlap`: the graphs are captured while the checkpoint is staged, and the weights
  committed after (startup_weight_load.py:537-543): the start waits for the longer of the two, then the commit,
  OVERLAP_COMMIT_SHARE of the weight loading.
- `--weight-cache-mode client`: with a daemon's socket (console.sim.weight_cache, the stand-in's daemon) the
  weights are mapped from it, IPC_LOAD_SHARE of a disk load; the socket absent, SGLang loads from disk (its warning
  line); a daemon of another model or layout is an error (weight_cache/ipc_loader.py:50-66).
- `--weight-loader-prefetch-checkpoints`: the stand-in's checkpoint is on a local disk, where prefetching does
  nothing (fields/model.py:303-309): the start is as long.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The dump of the shards, written once beside the first presharded load (as long again as a quarter of the load:
# writing what was read, on the same disk). An assumption.
PRESHARD_DUMP_SHARE = 0.25
# The commit of staged weights after an overlapped capture: a copy to the GPU, a tenth of a disk load. An assumption.
OVERLAP_COMMIT_SHARE = 0.1
# Mapping the weights from a weight-cache daemon over CUDA IPC instead of reading them. An assumption.
IPC_LOAD_SHARE = 0.05
CACHE_DIR_ENV = "SGLANG_CACHE_DIR"
DEFAULT_SOCKET = "/tmp/sglang_weight_cache_{device_uuid}.sock"  # SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE's default


class StartRefused(Exception):
    """The start dies here the way SGLang's does: `lines` are logged, then a traceback ending with `final`."""

    def __init__(self, final: str, lines: tuple[str, ...] = ()) -> None:
        super().__init__(final)
        self.final = final
        self.lines = lines


@dataclass
class WeightLoad:
    """How the target's weights load at this start: the factor on the profile's time, what is logged before and
    after, and what to leave behind once they are loaded."""

    factor: float = 1.0
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    ready_marker: Path | None = None  # presharded's READY file, written after the load
    shard_config: dict[str, Any] | None = None
    via_ipc: bool = False


def shard_config(resolved: dict[str, Any]) -> dict[str, Any]:
    """What a presharded checkpoint is keyed by (loader.py's _collect_shard_config: parallelism, quantization,
    dtype; the stand-in has no structural signature to add)."""
    return {
        "tp": int(resolved.get("tp_size") or 1),
        "dp": int(resolved.get("dp_size") or 1),
        "ep": int(resolved.get("ep_size") or 1),
        "pp": int(resolved.get("pp_size") or 1),
        "quantization": resolved.get("quantization"),
        "model_dtype": str(resolved.get("dtype") or "auto"),
    }


def model_dir(model_path: str, state_dir: Path) -> Path:
    """Where the model's files are on the simulated host: a local folder as given, a Hub id in its Hub cache."""
    if model_path.startswith(("/", ".")):
        return Path(model_path)
    return state_dir / "hf-cache" / ("models--" + model_path.replace("/", "--"))


def loader_extra(resolved: dict[str, Any]) -> dict[str, Any]:
    text = resolved.get("model_loader_extra_config")
    try:
        value = json.loads(text) if isinstance(text, str) and text.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def presharded_load(resolved: dict[str, Any], state_dir: Path, requantize_share: float) -> WeightLoad:
    """`--load-format presharded`: a first load that dumps, or a load of the shards that skips re-quantization."""
    config = shard_config(resolved)
    digest = hashlib.sha1(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
    root = loader_extra(resolved).get("presharded_path")
    base = Path(root) if root else model_dir(str(resolved.get("model_path") or "model"), state_dir) / "presharded"
    folder = base / f"TP-{config['tp']}-sig-{digest}"
    ready = folder / "READY"
    stored = None
    try:
        stored = json.loads((folder / "checksum.json").read_text()).get("shard_config") if ready.is_file() else None
    except (OSError, ValueError):
        stored = None
    if stored == config:
        return WeightLoad(factor=1.0 - requantize_share, before=(f"Loading from presharded checkpoint at {folder}",))
    before = (f"No presharded checkpoint at {folder}; doing first-time load and dump.",)
    return WeightLoad(factor=1.0 + PRESHARD_DUMP_SHARE, before=before, ready_marker=ready, shard_config=config)


def leave_presharded(load: WeightLoad) -> None:
    """After a first presharded load: the shards' checksum file and READY (the stand-in writes no shards).
    StartRefused where the folder cannot be written, as SGLang's dump fails."""
    if load.ready_marker is None:
        return
    folder = load.ready_marker.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "checksum.json").write_text(json.dumps({"shard_config": load.shard_config}))
        load.ready_marker.write_text("")
    except OSError as exc:
        raise StartRefused(f"{type(exc).__name__}: {exc}") from exc


def compile_cache_marker(env: dict[str, str], version: str, architecture: str, tp: int) -> Path | None:
    """Where the stand-in notes that a model's kernels are compiled (None: no SGLANG_CACHE_DIR, nothing kept)."""
    base = env.get(CACHE_DIR_ENV)
    if not base:
        return None
    key = hashlib.sha1(f"{version}|{architecture}|tp{tp}".encode()).hexdigest()[:16]
    return Path(base).expanduser() / "opsconsole-sim" / f"kernels-{key}"


def warm(marker: Path | None) -> bool:
    return marker is not None and marker.is_file()


def keep_compiled(marker: Path | None) -> str | None:
    """After a start: its kernels kept for the next one; a line to log where the folder cannot be written."""
    if marker is None or marker.is_file():
        return None
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("")
    except OSError as exc:
        return f"could not write the compile cache under {marker.parent.parent}: {exc}"
    return None


def weight_cache_load(resolved: dict[str, Any], gpu_uuid: str, profile: str) -> WeightLoad:
    """`--weight-cache-mode client`: the weights mapped from the daemon at the socket, or a disk load where there is
    no socket. StartRefused where a daemon answers for another model or layout, or does not answer at all."""
    path = str(resolved.get("weight_cache_socket") or DEFAULT_SOCKET.format(device_uuid=gpu_uuid))
    if not os.path.exists(path):
        return WeightLoad(
            before=("[IpcModelLoader] Weight cache not available or config mismatch, falling back to disk load",)
        )
    asked = {"model_path": resolved.get("model_path"), "tp_size": int(resolved.get("tp_size") or 1), "profile": profile}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(10.0)
            conn.connect(path)
            conn.sendall(json.dumps(asked).encode() + b"\n")
            answer = json.loads(conn.makefile().readline() or "{}")
    except (OSError, ValueError) as exc:
        raise StartRefused(f"RuntimeError: [IpcModelLoader] weight cache daemon at {path} failed: {exc}") from exc
    if not answer.get("ok"):
        raise StartRefused(
            f"RuntimeError: [IpcModelLoader] CacheConfig mismatch with the weight cache daemon at {path}: "
            f"{answer.get('mismatch', 'unknown')}"
        )
    fetched = f"[IpcModelLoader] Fetched {answer.get('tensors', 0)} tensors from daemon (transport=torch_ipc)"
    return WeightLoad(factor=IPC_LOAD_SHARE, before=(fetched,), via_ipc=True)
