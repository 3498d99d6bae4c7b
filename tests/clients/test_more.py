"""The heavier rest of the client matrix, run by `make clients` (which installs them and sets
PREFIXGATE_CLIENTS=all): DSPy (through LiteLLM) on OpenAI's and Anthropic's formats, and the Vercel AI SDK's
`generateObject` where npm is present (installed outside the repo)."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.clients.conftest import SYSTEM

pytestmark = pytest.mark.skipif(os.environ.get("PREFIXGATE_CLIENTS") != "all",
                                reason="the heavier clients run with `make clients` (PREFIXGATE_CLIENTS=all)")


@pytest.mark.parametrize("model", ["openai/gpt-5.4", "anthropic/claude-sonnet-5-5"])
def test_dspy_predict_structured_and_cache(gateway, key, model):
    dspy = pytest.importorskip("dspy")
    # DSPy's quirk: LiteLLM's OpenAI provider wants the base with /v1; its Anthropic one the bare address.
    base = gateway + "/v1" if model.startswith("openai/") else gateway
    # And it refuses max_tokens under 16,000 for OpenAI's reasoning models (gpt-5.x): None leaves it unset.
    lm = dspy.LM(model, api_base=base, api_key=key, cache=False, max_tokens=None if "gpt-5" in model else 300)

    class Plan(dspy.Signature):
        """Plan a trip from the handbook."""
        handbook: str = dspy.InputField()
        city: str = dspy.OutputField()
        nights: int = dspy.OutputField()

    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        first = dspy.Predict(Plan)(handbook=SYSTEM)
        dspy.Predict(Plan)(handbook=SYSTEM)
    assert (first.city, first.nights) == ("mock", 1)
    usage = lm.history[-1]["usage"]
    read = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or usage.get("cache_read_input_tokens")
    assert read and read > 0


VERCEL = textwrap.dedent("""
    import { createOpenAI } from '@ai-sdk/openai';
    import { createAnthropic } from '@ai-sdk/anthropic';
    import { createGoogleGenerativeAI } from '@ai-sdk/google';
    import { generateObject } from 'ai';
    import { z } from 'zod';
    const [base, key] = process.argv.slice(2);
    const schema = z.object({ city: z.string(), nights: z.number().int() });
    const models = [createOpenAI({ baseURL: base + '/v1', apiKey: key }).chat('gpt-5.4'),
                    createAnthropic({ baseURL: base + '/v1', apiKey: key })('claude-sonnet-5-5'),
                    createGoogleGenerativeAI({ baseURL: base + '/v1beta', apiKey: key })('gemini-3.5-flash')];
    for (const model of models) {
      const { object } = await generateObject({ model, schema, prompt: 'Plan a trip' });
      console.log(JSON.stringify(object));
    }
""")


def test_vercel_ai_sdk_generate_object(gateway, key, tmp_path_factory):
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("npm and node are not installed: the Vercel AI SDK's generateObject is not checked")
    folder = Path(os.environ.get("PREFIXGATE_NODE_CLIENTS", tmp_path_factory.mktemp("vercel")))
    (folder / "package.json").write_text('{"type": "module", "private": true}')
    subprocess.run([npm, "install", "-s", "ai@5", "@ai-sdk/openai@2", "@ai-sdk/anthropic@2", "@ai-sdk/google@2",
                    "zod@3"], cwd=folder,
                   check=True, timeout=300)
    (folder / "generate.mjs").write_text(VERCEL)
    out = subprocess.run(["node", "generate.mjs", gateway, key], cwd=folder, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ['{"city":"mock","nights":1}'] * 3     # OpenAI, Anthropic, Gemini
