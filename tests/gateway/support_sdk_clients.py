"""The real SDK clients pointed at a running gateway with a tenant's key (no retries: a refusal is seen once)."""

from __future__ import annotations

import anthropic
import openai
from google import genai


def oai(gw: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw}/v1", api_key=key, max_retries=0)


def claude(gw: str, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw, api_key=key, max_retries=0)


def gemini(gw: str, key: str) -> genai.Client:
    return genai.Client(api_key=key, http_options={"base_url": gw})
