"""Realistic, deterministic Anthropic traces for the planner benchmark.

Each generator returns (original records, static-first records): the second is the same traffic as
an expert would restructure it by hand (volatile values in the user turn, documents before the
question), with no cache markers; the benchmark's expert then places checkpoints with hindsight.
"""

from __future__ import annotations

import json
import random
import uuid

from prefixgate.providers.trace import TraceRecord

MODEL = "claude-sonnet-5-5"
WORDS = ("order shipping refund policy customer account invoice warranty product support return label "
         "delivery carrier tracking payment card address update cancel subscription plan upgrade device "
         "battery screen replace repair store pickup exchange credit balance statement tax region").split()


def prose(rng: random.Random, sentences: int) -> str:
    out = []
    for _ in range(sentences):
        n = rng.randint(8, 18)
        out.append(" ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + ".")
    return " ".join(out)


def _record(t: float, route: str, body: dict, output: int = 150) -> TraceRecord:
    return TraceRecord(line=0, t=t, provider="anthropic", model=MODEL, body=body, route=route, tenant="acme",
                       output_tokens=output)


def _body(system, messages, tools=None) -> dict:
    body: dict = {"model": MODEL, "max_tokens": 1024}
    if tools:
        body["tools"] = tools
    if system is not None:
        body["system"] = system
    body["messages"] = messages
    return body


def _ts(t: float) -> str:
    s = int(t)
    return f"2026-11-22T{9 + s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}Z"


def support_bot(seed: int = 1) -> tuple[list, list]:
    """A support bot whose system prompt starts with the current time; sessions of 1-4 turns."""
    rng = random.Random(seed)
    policy = "ACME support handbook.\n" + "\n".join(prose(rng, 6) for _ in range(40))
    orig, fixed = [], []
    for _ in range(45):
        t = rng.uniform(0, 7200)
        turns = rng.randint(1, 4)
        hist_o: list = []
        hist_f: list = []
        for k in range(turns):
            question = f"Question {k}: " + prose(rng, 2)
            answer = prose(rng, 4)
            ctx = f"Current date and time: {_ts(t)}\n"
            system = f"You are Ava, ACME's support agent.\n{ctx}{policy}"
            hist_o = hist_o + [{"role": "user", "content": question}]
            orig.append(_record(t, "support", _body(system, hist_o)))
            user_f = {"role": "user", "content": [{"type": "text", "text": "Context:\n" + ctx},
                                                  {"type": "text", "text": question}]}
            hist_f = hist_f + [user_f]
            fixed.append(_record(t, "support", _body(f"You are Ava, ACME's support agent.\n{policy}", hist_f)))
            hist_o = hist_o + [{"role": "assistant", "content": answer}]
            hist_f = hist_f + [{"role": "assistant", "content": answer}]
            t += rng.uniform(20, 150)
    return orig, fixed


def agent_loop(seed: int = 2) -> tuple[list, list]:
    """A coding agent: tools, a static system prompt, growing tool-use turns (some with many parallel calls)."""
    rng = random.Random(seed)
    tools = [{"name": f"tool_{i}", "description": prose(rng, 3),
              "input_schema": {"type": "object", "properties": {f"arg{j}": {"type": "string", "description": prose(rng, 1)}
                                                                 for j in range(4)}}} for i in range(8)]
    system = "You are a careful coding agent.\n" + "\n".join(prose(rng, 5) for _ in range(20))
    records = []
    for s in range(12):
        t = rng.uniform(0, 3600)
        messages: list = [{"role": "user", "content": "Task: " + prose(rng, 3)}]
        for turn in range(12):
            records.append(_record(t, "agent", _body(system, list(messages), tools), output=120))
            calls = 12 if (s % 4 == 0 and turn == 5) else rng.randint(1, 3)
            ids = [f"toolu_{s}_{turn}_{c}" for c in range(calls)]
            messages.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": i, "name": rng.choice(tools)["name"], "input": {"arg0": prose(rng, 1)}} for i in ids]})
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": i, "content": prose(rng, rng.randint(8, 25))} for i in ids]})
            t += rng.uniform(3, 15)
    return records, records


def rag(seed: int = 3) -> tuple[list, list]:
    """Questions over a small library of long documents, the document after the question."""
    rng = random.Random(seed)
    docs = [f"Document {d}.\n" + "\n".join(prose(rng, 6) for _ in range(rng.randint(45, 70))) for d in range(8)]
    system = "Answer using only the document. Cite sections.\n" + prose(rng, 10)
    orig, fixed = [], []
    t = 0.0
    for _ in range(160):
        doc = docs[min(int(rng.paretovariate(1.2)) - 1, len(docs) - 1)]
        q = "Question: " + prose(rng, 1)
        orig.append(_record(t, "rag", _body(system, [{"role": "user", "content": [
            {"type": "text", "text": q}, {"type": "text", "text": doc}]}])))
        fixed.append(_record(t, "rag", _body(system, [{"role": "user", "content": [
            {"type": "text", "text": doc}, {"type": "text", "text": q}]}])))
        t += rng.expovariate(1 / 35)
    return orig, fixed


def chat(seed: int = 4) -> tuple[list, list]:
    """Multi-turn chat with think times from seconds to tens of minutes."""
    rng = random.Random(seed)
    system = "You are a friendly assistant.\n" + "\n".join(prose(rng, 5) for _ in range(16))
    records = []
    for _ in range(25):
        t = rng.uniform(0, 5400)
        messages: list = []
        for _ in range(rng.randint(4, 8)):
            messages = messages + [{"role": "user", "content": prose(rng, 3)}]
            records.append(_record(t, "chat", _body(system, list(messages)), output=250))
            messages = messages + [{"role": "assistant", "content": prose(rng, 12)}]
            r = rng.random()
            t += rng.uniform(5, 60) if r < 0.3 else rng.uniform(60, 300) if r < 0.7 else rng.uniform(360, 2400)
    return records, records


def batch_classification(seed: int = 5) -> tuple[list, list]:
    """A batch job with a fresh request id at the top of an otherwise fixed system prompt."""
    rng = random.Random(seed)
    instructions = "Classify the ticket into one label.\n" + "\n".join(
        f"Label {i}: " + prose(rng, 4) for i in range(40))
    orig, fixed = [], []
    for i in range(300):
        t = i * 2.0
        rid = f"Request ID: {uuid.UUID(int=rng.getrandbits(128))}\n"
        item = "Ticket: " + prose(rng, 3)
        orig.append(_record(t, "classify", _body(rid + instructions, [{"role": "user", "content": item}]), output=5))
        fixed.append(_record(t, "classify", _body(instructions, [{"role": "user", "content": [
            {"type": "text", "text": "Context:\n" + rid}, {"type": "text", "text": item}]}]), output=5))
    return orig, fixed


FIRST = ("Jane", "Omar", "Li", "Priya", "Carlos", "Ngozi", "Sven", "Aiko", "Mateus", "Fatima", "Noor", "Tomasz")
LAST = ("Doe", "Haddad", "Wei", "Natarajan", "Ruiz", "Okafor", "Berg", "Tanaka", "Silva", "Kowalski", "Ali", "Park")


def _sessions(rng: random.Random, fixed: str, context_of, route: str, sessions: int = 50) -> tuple[list, list]:
    """Sessions of 1-3 turns whose system prompt opens with per-session values (`context_of(rng)`, a string
    ending in a space or newline) before `fixed`; the expert moves the values to the first user turn."""
    orig, moved = [], []
    for _ in range(sessions):
        t = rng.uniform(0, 7200)
        ctx = context_of(rng)
        hist_o: list = []
        hist_f: list = []
        for k in range(rng.randint(1, 3)):
            question = f"Question {k}: " + prose(rng, 2)
            answer = prose(rng, 4)
            hist_o = hist_o + [{"role": "user", "content": question}]
            orig.append(_record(t, route, _body(ctx + fixed, hist_o)))
            if k == 0:
                hist_f = [{"role": "user", "content": [{"type": "text", "text": "Context:\n" + ctx.rstrip(" ") + ("" if ctx.endswith("\n") else "\n")},
                                                       {"type": "text", "text": question}]}]
            else:
                hist_f = hist_f + [{"role": "user", "content": question}]
            moved.append(_record(t, route, _body(fixed, hist_f)))
            hist_o = hist_o + [{"role": "assistant", "content": answer}]
            hist_f = hist_f + [{"role": "assistant", "content": answer}]
            t += rng.uniform(20, 150)
    return orig, moved


def support_desk(seed: int = 7) -> tuple[list, list]:
    """A support desk whose opening sentence names the customer, account, order and email, on the same line
    as the instructions: values no detector knows by shape."""
    rng = random.Random(seed)
    fixed = "Follow the Northwind service handbook below. " + " ".join(prose(rng, 6) for _ in range(40))

    def opening(r: random.Random) -> str:
        first, last = r.choice(FIRST), r.choice(LAST)
        return (f"You are helping {first} {last} (account {r.randint(10**5, 10**6)}) with order "
                f"N{r.randint(10**4, 10**5)}; reply to {first.lower()}.{last.lower()}@example.com. ")
    return _sessions(rng, fixed, opening, "desk")


def crm_json_context(seed: int = 8) -> tuple[list, list]:
    """A CRM assistant whose system prompt starts with a small JSON record of the customer, then fixed rules."""
    rng = random.Random(seed)
    fixed = "Use the customer record above. Rules:\n" + "\n".join(f"- {prose(rng, 3)}" for _ in range(60))

    def record(r: random.Random) -> str:
        return json.dumps({"customer": f"{r.choice(FIRST)} {r.choice(LAST)}", "tier": r.choice(["gold", "silver"]),
                           "balance": f"{r.randint(0, 9999)}.{r.randint(0, 99):02d}", "open_cases": r.randint(0, 5)}) + "\n"
    return _sessions(rng, fixed, record, "crm")


def one_off(seed: int = 6) -> tuple[list, list]:
    """Long prompts that never repeat."""
    rng = random.Random(seed)
    records = []
    for i in range(50):
        doc = "\n".join(prose(rng, 6) for _ in range(70))
        records.append(_record(i * 150.0, "oneoff", _body("You summarise reports.", [
            {"role": "user", "content": f"Summarise report {i}:\n{doc}"}]), output=300))
    return records, records


TRACES = {
    "support bot, volatile header": support_bot,
    "agent loop with tools": agent_loop,
    "RAG, document after question": rag,
    "multi-turn chat, long gaps": chat,
    "batch classification, ids in system": batch_classification,
    "one-off long prompts": one_off,
    "support desk, customer values in the opening sentence": support_desk,
    "CRM assistant, JSON record before the rules": crm_json_context,
}
