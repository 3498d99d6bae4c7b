"""The gateway's in-process engine target: once closed (the gateway stopped), it holds no engine, whoever still
holds the target (FastAPI keeps every endpoint it classified, closures and what they hold included), and a
request to it is answered 503 rather than loading the model again."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from prefixgate.errors import RequestError
from prefixgate.local_backend.engine import LLMEngine
from prefixgate.local_backend.frontend import local_target


def engines_of(model: str) -> list[LLMEngine]:
    gc.collect()
    return [o for o in gc.get_objects() if type(o) is LLMEngine and o.config.model == model]


def test_a_closed_target_lets_go_of_its_engine_and_answers_503(tiny, tmp_path: Path) -> None:
    loaded, reference = tiny
    reference.save_pretrained(tmp_path)
    loaded.tokenizer.save_pretrained(tmp_path)
    target = local_target(str(tmp_path), dtype="float32")
    asyncio.run(target.start())
    assert len(engines_of(str(tmp_path))) == 1
    target.close()
    assert engines_of(str(tmp_path)) == []
    with pytest.raises(RequestError) as refused:
        asyncio.run(target.chat({"messages": [{"role": "user", "content": "abc"}]}, stream=False))
    assert refused.value.status == 503 and "shut down" in str(refused.value)
    assert engines_of(str(tmp_path)) == []
