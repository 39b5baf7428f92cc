"""SGLang's log lines, word for word, with its log format (`[YYYY-MM-DD HH:MM:SS TP0] message`).

Pure text builders; the server decides when to print them. Keeping the exact strings here lets the
console's journal follower (which watches for these markers) be tested against the same text.
"""

from __future__ import annotations

import time
from http import HTTPStatus

_last_second: list[tuple[int, str]] = [(-1, "")]  # the last second formatted: an access line per request reuses it


def stamp(prefix: str = "", now: float | None = None) -> str:
    second = int(time.time() if now is None else now)
    cached_second, text = _last_second[0]
    if second != cached_second:
        text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
        _last_second[0] = (second, text)
    return f"[{text}{' ' + prefix if prefix else ''}]"


def line(message: str, *, rank: str = "", now: float | None = None) -> str:
    """One log line: scheduler lines carry the rank ("TP0"), HTTP-server lines none."""
    return f"{stamp(rank, now)} {message}"


def load_weight_begin(avail_gb: float) -> str:
    return f"Load weight begin. avail mem={avail_gb:.2f} GB"


def load_weight_end(model_class: str, dtype: str, avail_gb: float, usage_gb: float) -> str:
    return (
        f"Load weight end. type={model_class}, dtype={dtype}, avail mem={avail_gb:.2f} GB, mem usage={usage_gb:.2f} GB."
    )


def load_weight_end_0517(elapsed_s: float, model_class: str, avail_gb: float, usage_gb: float) -> str:
    """0.5.17: the elapsed time first, no dtype."""
    return (
        f"Load weight end. elapsed={elapsed_s:.2f} s, type={model_class}, avail mem={avail_gb:.2f} GB, "
        f"mem usage={usage_gb:.2f} GB."
    )


def kv_cache_allocated_0517(tokens: int, k_gb: float, v_gb: float, dtype: str = "torch.bfloat16") -> str:
    return f"KV Cache is allocated. dtype: {dtype}, #tokens: {tokens}, K size: {k_gb:.2f} GB, V size: {v_gb:.2f} GB"


def engine_startup_timings(t: dict[str, object]) -> str:
    """0.5.17's "Engine startup timings (s): ..." line (server_info startup_time, the same figures)."""
    graphs = t.get("cuda_graph") or {}
    assert isinstance(graphs, dict)
    graph_text = ", ".join(f"{k}={float(v):.2f}" for k, v in graphs.items())
    return (
        f"Engine startup timings (s): load_weight={float(t['load_weight']):.2f}, "  # type: ignore[arg-type]
        f"kv_cache_allocation={float(t['kv_cache_allocation']):.2f}, "  # type: ignore[arg-type]
        f"scheduler_e2e={float(t['scheduler_e2e']):.2f}, cuda_graph={{{graph_text}}}, "  # type: ignore[arg-type]
        f"tokenizer_e2e={float(t['tokenizer_e2e']):.2f}"  # type: ignore[arg-type]
    )


def kv_cache_allocated(tokens: int, k_gb: float, v_gb: float) -> str:
    return f"KV Cache is allocated. #tokens: {tokens}, K size: {k_gb:.2f} GB, V size: {v_gb:.2f} GB"


def memory_pool_end(avail_gb: float) -> str:
    return f"Memory pool end. avail mem={avail_gb:.2f} GB"


def capture_begin(kind: str, avail_gb: float) -> str:
    """kind: "" (target), "draft " or "draft extend "."""
    return f"Capture {kind}cuda graph begin. This can take up to several minutes. avail mem={avail_gb:.2f} GB"


def capture_end(kind: str, elapsed_s: float, usage_gb: float, avail_gb: float) -> str:
    return (
        f"Capture {kind}cuda graph end. Time elapsed: {elapsed_s:.2f} s. mem usage={usage_gb:.2f} GB. "
        f"avail mem={avail_gb:.2f} GB."
    )


def scheduler_summary(
    max_total_num_tokens: int,
    chunked_prefill_size: int,
    max_running_requests: int,
    context_len: int,
    avail_gb: float,
) -> str:
    return (
        f"max_total_num_tokens={max_total_num_tokens}, chunked_prefill_size={chunked_prefill_size}, "
        f"max_prefill_tokens=16384, max_running_requests={max_running_requests}, context_len={context_len}, "
        f"available_gpu_mem={avail_gb:.2f} GB"
    )


def prefill_batch(new_seq: int, new_token: int, cached: int, usage: float, running: int, queued: int) -> str:
    return (
        f"Prefill batch, #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: {cached}, "
        f"token usage: {usage:.2f}, #running-req: {running}, #queue-req: {queued}"
    )


def prefill_batch_0517(
    new_seq: int,
    new_token: int,
    cached: int,
    usage: float,
    running: int,
    queued: int,
    *,
    cuda_graph: bool,
    throughput: float,
) -> str:
    """0.5.17 adds the pending tokens, whether a CUDA graph ran, and the input throughput."""
    return (
        f"{prefill_batch(new_seq, new_token, cached, usage, running, queued)}, #pending-token: 0, "
        f"cuda graph: {cuda_graph}, input throughput (token/s): {throughput:.2f}"
    )


def decode_batch(
    running: int,
    tokens: int,
    usage: float,
    accept_len: float | None,
    accept_rate: float | None,
    gen_throughput: float,
    queued: int,
) -> str:
    spec = f"accept len: {accept_len:.2f}, accept rate: {accept_rate:.2f}, " if accept_len is not None else ""
    return (
        f"Decode batch, #running-req: {running}, #token: {tokens}, token usage: {usage:.2f}, {spec}"
        f"cuda graph: True, gen throughput (token/s): {gen_throughput:.2f}, #queue-req: {queued}"
    )


def uvicorn_lines(pid: int, host: str, port: int) -> list[str]:
    return [
        f"INFO:     Started server process [{pid}]",
        "INFO:     Waiting for application startup.",
        "INFO:     Application startup complete.",
        f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)",
    ]


_PHRASES = {status.value: status.phrase for status in HTTPStatus}
# uvicorn's levels at which its access logger (INFO) still prints.
_ACCESS_LEVELS = frozenset({"trace", "debug", "info"})


def access(peer: str, method: str, target: str, status: int, http_version: str = "1.1") -> str:
    """uvicorn's access line as SGLang configures it (`line()` puts the "[date time] " stamp in front, as on every
    SGLang line): the client's address:port, the request line with its query string, the status and its phrase
    (`INFO:     127.0.0.1:37124 - "GET /health HTTP/1.1" 503 Service Unavailable`, measured on 0.5.17)."""
    return f'INFO:     {peer} - "{method} {target} HTTP/{http_version}" {status} {_PHRASES.get(status, "")}'


def access_log_on(resolved: dict[str, object]) -> bool:
    """Whether uvicorn prints access lines: SGLang runs it at --log-level-http, else --log-level (default info),
    and the access logger writes at INFO."""
    level = resolved.get("log_level_http") or resolved.get("log_level") or "info"
    return str(level).lower() in _ACCESS_LEVELS


def access_log_excluded(resolved: dict[str, object]) -> tuple[str, ...]:
    """--uvicorn-access-log-exclude-prefixes (0.5.9 and later) as SGLang's filter holds them: empty strings
    dropped, duplicates removed in order."""
    given = resolved.get("uvicorn_access_log_exclude_prefixes") or ()
    prefixes = [str(p) for p in given if p] if isinstance(given, list | tuple) else []
    return tuple(dict.fromkeys(prefixes))


def access_logged(target: str, excluded: tuple[str, ...]) -> bool:
    """SGLang's filter: a request whose path (its query string left out) starts with an excluded prefix is not
    logged; plain str.startswith, so "/health" hides "/health_generate" too."""
    return not excluded or not target.partition("?")[0].startswith(excluded)


READY = "The server is fired up and ready to roll!"


def server_args(resolved: dict[str, object]) -> str:
    """The settings line every SGLang start logs (`logger.info(f"{server_args=}")`), keys and tokens included:
    what the console must mask (console.secrets.SecretMask)."""
    return "server_args=ServerArgs(" + ", ".join(f"{key}={value!r}" for key, value in resolved.items()) + ")"
