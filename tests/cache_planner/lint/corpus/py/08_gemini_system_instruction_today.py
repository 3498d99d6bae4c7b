"""Gemini: today's date formatted into the system instruction ahead of the guidance."""
import datetime

from google import genai
from google.genai import types

GUIDE = """You are a travel planner. Propose itineraries with realistic transfer times, opening hours and
a budget estimate per day in the traveller's currency. Prefer public transport, flag visa requirements,
and never book anything; give links to official sites only.
"""


def plan(trip: str) -> str:
    client = genai.Client()
    today = datetime.date.today()
    config = types.GenerateContentConfig(
        # prefixgate: quiet=PG001 (a date changes once a day)
        system_instruction=f"Today's date: {today:%A %d %B %Y}.\n" + GUIDE,
    )
    return client.models.generate_content(model="gemini-3.5-flash", contents=trip, config=config).text
