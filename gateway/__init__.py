"""The gateway: a drop-in proxy for OpenAI, Anthropic and Gemini clients."""
