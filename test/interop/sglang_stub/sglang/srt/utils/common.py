"""The restricted unpickler SGLang's receiver uses for embedding messages.

Same rules as SGLang's SafeUnpickler: classes and functions load only from allow-listed
module prefixes (builtins, collections, torch, sglang.srt), a few dangerous callables are
refused outright, and everything else (numpy, http.HTTPStatus, os, ...) is refused.
"""
import io
import pickle

ALLOWED_MODULE_PREFIXES = (
    "builtins.",
    "collections.",
    "torch.",
    "sglang.srt.",
)
DENIED = {
    ("builtins", "eval"),
    ("builtins", "exec"),
    ("builtins", "compile"),
    ("builtins", "__import__"),
    ("builtins", "getattr"),
    ("builtins", "open"),
}


class SafeUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in DENIED:
            raise RuntimeError(f"Blocked unsafe class loading ({module}.{name})")
        if any((module + ".").startswith(p) for p in ALLOWED_MODULE_PREFIXES):
            return super().find_class(module, name)
        raise RuntimeError(f"Blocked unsafe class loading ({module}.{name})")


def safe_pickle_loads(data):
    return SafeUnpickler(io.BytesIO(bytes(data))).load()
