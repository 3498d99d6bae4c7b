"""Gemini: the clock to the minute in the system instruction, ahead of the guidance."""
from datetime import datetime

from google import genai
from google.genai import types

GUIDE = """You are a dispatcher for a bike courier service. Assign each job to the nearest free courier,
estimate pickup and drop-off times, and warn when a job cannot make its deadline. Never share a courier's
phone number with customers; relay messages instead.
"""


def dispatch(jobs: str) -> str:
    client = genai.Client()
    config = types.GenerateContentConfig(
        # prefixgate: expect=PG001
        system_instruction=f"Now: {datetime.now():%H:%M}.\\n" + GUIDE,
    )
    return client.models.generate_content(model="gemini-3.5-flash", contents=jobs, config=config).text
