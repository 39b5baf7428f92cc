"""The embedded SGLang stand-in and its simulated GPUs.

    python -m console.sim --model-path M [SGLang flags] [--sim-* options]   the server (see __main__)
    python -m console.sim.nvidia_smi [nvidia-smi options]                   the GPUs it drives
    opsconsole demo                                                         both, under a local unit supervisor

Modules: __main__ (flags, SGLang's refusals), server (startup phases, real-time engine driver, GPU figures),
http_api (SGLang's routes), lifecycle (port closed while loading, warm-up, SIGTERM drain),
shapes (JSON shapes per SGLang version), sglang_log (SGLang's log lines), metrics (/metrics),
tokenizer (deterministic tokenizer + its Hugging Face folder), gpus / nvidia_smi (simulated GPUs and the
nvidia-smi formats), supervisor (systemd-like unit runner, control socket, DemoServiceManager), guard (stops
the unit if the supervisor is killed), demo (`opsconsole demo`); profiles / perf / engine (the performance
model); plugin (`register()`: the stand-in as an SGLang launcher and the demo transport, for the composition
root; console.host and console.sglang import nothing from here).
"""
