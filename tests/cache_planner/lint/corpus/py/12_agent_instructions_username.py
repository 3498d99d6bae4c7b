"""OpenAI Agents SDK: the user's name opens the instructions."""
from agents import Agent

BASE = """You are a personal finance coach. Ask about income, fixed costs and goals before suggesting a
budget. Use the 50/30/20 rule as a starting point, explain every number you give, and never recommend
specific stocks, funds or crypto assets. Keep answers under 200 words unless the user asks for detail.
"""


def make_agent(username: str) -> Agent:
    # prefixgate: expect=PG001
    return Agent(name="coach", instructions=f"You are talking to {username}.\n" + BASE)
