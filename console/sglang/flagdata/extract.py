# mypy: ignore-errors
"""Regenerate the per-version flag tables (sglang-X.Y.Z.json) from released SGLang wheels.

Not used at run time. It imports `sglang.srt.server_args` from an unpacked wheel with every
third-party and non-argument sglang module replaced by a permissive stub, calls SGLang's own
`ServerArgs.add_cli_args(parser)` and dumps the resulting argparse actions. This way the table
holds every flag of that release (needed for faithful "unrecognized arguments" and prefix
ambiguity errors), not only the ones we know by name.

    pip download sglang==0.5.9 --no-deps -d /tmp/w && unzip -q /tmp/w/*.whl 'sglang/*' -d /tmp/w/x
    python -m venv /tmp/v && /tmp/v/bin/pip install msgspec      # 0.5.14+ builds ServerArgs with msgspec
    /tmp/v/bin/python console/sglang/flagdata/extract.py /tmp/w/x 0.5.9 > console/sglang/flagdata/sglang-0.5.9.json

Besides the flags it writes `fields`: every ServerArgs dataclass field in declaration order with its default
(also the ones without a flag, e.g. `custom_sigquit_handler`), which is the key set and order of that release's
`/server_info` (the simulator serves it). Tables generated before this was added have no `fields`.

Choices computed from stubbed registries (tool-call/reasoning parsers from 0.5.12 on, LoRA
targets) come out empty or as just ["auto"]; they are written as null (not validated).
"""

import argparse
import dataclasses
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import sys
import types

ROOT = sys.argv[1]
VERSION = sys.argv[2]
sys.path.insert(0, ROOT)

# ServerArgs field names where the argparse dest differs (0.5.6-0.5.12 `from_cli_args`).
DEST_TO_FIELD = {
    "tensor_parallel_size": "tp_size",
    "pipeline_parallel_size": "pp_size",
    "data_parallel_size": "dp_size",
    "expert_parallel_size": "ep_size",
    "attention_context_parallel_size": "attn_cp_size",
    "moe_data_parallel_size": "moe_dp_size",
}
ACTIONS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "BooleanOptionalAction": "boolean_optional",
    "DeprecatedAction": "deprecated_ignore",
    "DeprecatedStoreTrueAction": "store_true",
    "DeprecatedAliasStoreAction": "store",
    "DeprecatedStoreConstAction": "store_const",
    "LoRAPathAction": "store",
}
TYPES = {"int": "int", "float": "float", "str": "str", "loads": "json"}


class DummyBase:
    def __init_subclass__(cls, **kw):
        pass

    def __init__(self, *a, **k):
        pass

    def __class_getitem__(cls, k):
        return cls


class Dummy:
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return Dummy()

    def __getattr__(self, n):
        if n.startswith("__") and n.endswith("__"):
            raise AttributeError(n)
        return Dummy()

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __mro_entries__(self, bases):
        return (DummyBase,)

    def __or__(self, o):
        return self

    def __ror__(self, o):
        return self

    def __add__(self, o):
        return self

    def __radd__(self, o):
        return self

    def __contains__(self, o):
        return True

    def __len__(self):
        return 0

    def __str__(self):
        return "DUMMY"

    def keys(self):
        return self

    def __getitem__(self, k):
        return Dummy()

    def __int__(self):
        return 0

    def __index__(self):
        return 0

    def __lt__(self, o):
        return False

    __gt__ = __le__ = __ge__ = __eq__ = __lt__

    def __hash__(self):
        return 0


class StubModule(types.ModuleType):
    def __getattr__(self, n):
        if n == "__version__":
            return "99.0.0"
        if n.startswith("__") and n.endswith("__"):
            raise AttributeError(n)
        return Dummy()


ALLOW = ("sglang.srt.server_args", "sglang.srt.arg_groups", "sglang.srt.environ")
PKG_STUBS = ("sglang", "sglang.srt")


class StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if name in PKG_STUBS:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        if name.startswith(ALLOW) or top in sys.stdlib_module_names or top == "msgspec":
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        module = StubModule(spec.name)
        module.__path__ = [os.path.join(ROOT, *spec.name.split("."))] if spec.name in PKG_STUBS else []
        return module

    def exec_module(self, module):
        pass


def plain(value):
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def main():
    sys.meta_path.insert(0, StubFinder())
    server_args = importlib.import_module("sglang.srt.server_args")
    parser = argparse.ArgumentParser()
    server_args.ServerArgs.add_cli_args(parser)
    rows = []
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        choices = action.choices
        if choices is not None:
            listed = [] if isinstance(choices, Dummy) else list(choices)
            if not listed or listed == ["auto"] or any(isinstance(c, Dummy) for c in listed):
                choices = None
            else:
                choices = sorted(listed) if isinstance(choices, set) else listed
        type_name = getattr(action.type, "__name__", None) if action.type is not None else None
        kind = ACTIONS[type(action).__name__]
        nargs = action.nargs if kind in ("store", "store_const") else None
        rows.append(
            {
                "options": list(action.option_strings),
                "dest": DEST_TO_FIELD.get(action.dest, action.dest),
                "action": kind,
                "type": TYPES.get(type_name, "str") if kind == "store" else None,
                "nargs": nargs,
                "choices": plain(choices),
                "default": plain(action.default),
                "const": plain(getattr(action, "const_value", action.const)),
                "required": bool(action.required),
                "deprecated": type(action).__name__.startswith("Deprecated"),
            }
        )
    fields = []
    for f in dataclasses.fields(server_args.ServerArgs):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        fields.append({"name": f.name, "default": plain(default)})
    json.dump({"version": VERSION, "flags": rows, "fields": fields}, sys.stdout, separators=(",", ":"))


if __name__ == "__main__":
    main()
