"""Model sources: an HF folder, a safetensors file next to its config, bundled names, the cache location."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from prefixgate.local_backend.engine import LLM
from prefixgate.local_backend.model_loader import ModelNotFound, cache_root, load_model, resolve_folder
from tests.local_backend.support_reference import greedy


@pytest.fixture(scope="module")
def hf_folder(tiny, tmp_path_factory: pytest.TempPathFactory) -> Path:
    loaded, ref = tiny
    folder = tmp_path_factory.mktemp("tiny-hf")
    ref.save_pretrained(folder)
    loaded.tokenizer.save_pretrained(folder)
    return folder


def test_hf_folder_and_safetensors_file_load_the_same_model(tiny, hf_folder: Path) -> None:
    want = LLM("tiny", loaded=tiny[0]).generate("abc", greedy(6))[0].outputs[0].token_ids
    for source in (hf_folder, hf_folder / "model.safetensors"):
        loaded = load_model(str(source))
        assert loaded.folder == hf_folder
        assert loaded.weights.keys() == tiny[0].weights.keys()
        assert all(torch.equal(loaded.weights[k], tiny[0].weights[k]) for k in loaded.weights)
        assert LLM(str(source), loaded=loaded).generate("abc", greedy(6))[0].outputs[0].token_ids == want


def test_unknown_models_are_refused_with_the_choices(tmp_path: Path) -> None:
    for bad in ("gpt-5.4", str(tmp_path), str(tmp_path / "missing.gguf")):
        with pytest.raises(ModelNotFound, match="smollm2-135m"):
            resolve_folder(bad)


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PREFIXGATE_CACHE_DIR", str(tmp_path))
    assert cache_root() == tmp_path
    monkeypatch.delenv("PREFIXGATE_CACHE_DIR")
    assert cache_root() == Path.home() / ".cache" / "prefixgate"
