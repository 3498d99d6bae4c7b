"""Wire dialects: OpenAI Chat Completions, Anthropic Messages, Gemini generateContent <-> IR."""
