"""prefixgate.wrap(client): client-side planning for openai, anthropic and google-genai clients."""
