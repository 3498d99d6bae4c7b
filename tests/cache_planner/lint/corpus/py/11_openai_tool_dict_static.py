"""OpenAI function tools with fixed descriptions, built once: no warning."""
import json

from openai import OpenAI

UNITS = "metric"

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_forecast",
        "description": f"Get the 5-day forecast for a city, in {UNITS} units. Call it once per city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]


def run(question: str) -> str:
    client = OpenAI()
    out = client.chat.completions.create(model="gpt-4o", tools=TOOLS,
                                         messages=[{"role": "user", "content": question}])
    return json.dumps(out.model_dump())
