"""Which Claude models take sampling parameters (`temperature`, `top_p`, `top_k`).

Claude Opus 4.7 and later answer any non-default value with a 400 "`temperature` is deprecated for this model."
on every platform (Anthropic's list, quoted in memberjunction's RejectsSamplingParams: Fable and Mythos 5 and 5.1,
Mythos Preview, Opus 5.5, 5, 4.8, 4.7, Sonnet 5.5, 5, Haiku 5.5; the 5.2 models are taken to follow), and the
documented fix is to omit them. A request translated from a dialect whose callers routinely send a temperature
(LangChain's ChatOpenAI defaults to 0.7) must leave it out for these models. Opus 4.1 to the 4.6 models take
either `temperature` or `top_p`: a caller's pair keeps its temperature.
"""

from __future__ import annotations

import re

from prefixgate.dialects.neutral import Chat

_NONE = frozenset({
    "claude-fable-5-2", "claude-mythos-5-2", "claude-fable-5-1", "claude-mythos-5-1", "claude-fable-5",
    "claude-mythos-5", "claude-mythos-preview", "claude-opus-5-5", "claude-opus-5", "claude-opus-4-8",
    "claude-opus-4-7", "claude-sonnet-5-5", "claude-sonnet-5", "claude-haiku-5-5",
})
# Claude Opus 4.1 to the 4.6 models take one of the two: both are a 400 "`temperature` and `top_p` cannot both be
# specified for this model. Please use only one." (reported for Opus 4.1, Sonnet 4.5 and Haiku 4.5 in
# cloud-apim/otoroshi-llm-extension#140, Sonnet 4.6 on Bedrock in skydiscover-ai/skydiscover#15; Opus 4.5 and 4.6
# are taken to follow), where OpenAI and Gemini take both: the caller's temperature is kept.
_ONE_OF_TWO = frozenset({"claude-opus-4-1", "claude-opus-4-5", "claude-opus-4-6", "claude-sonnet-4-5",
                         "claude-sonnet-4-6", "claude-haiku-4-5"})
# A platform's spelling around the model: Bedrock's `us.anthropic.` and `-v1:0`, Vertex's `@date`, a `-date`.
_SUFFIX = re.compile(r"(@\d+|-v\d+(:\d+)?|-\d{8})+$")


def claude_id(model: str) -> str:
    """A Claude model's Anthropic id from any platform's spelling of it (`us.anthropic.claude-x-v1:0`, `claude-x@date`)."""
    return _SUFFIX.sub("", model.rsplit(".", 1)[-1])


def takes_sampling(model: str) -> bool:
    """Whether `model` (any platform's id for it) accepts sampling parameters; unknown models are taken to."""
    return claude_id(model) not in _NONE


def takes_one_of_two(model: str) -> bool:
    """Whether `model` (any platform's id for it) refuses `temperature` and `top_p` together."""
    return claude_id(model) in _ONE_OF_TWO


def put_sampling(out: dict, chat: Chat, model: str, temperature: str, top_p: str) -> None:
    """`chat`'s temperature and top_p into `out` under the names given, unless `model` refuses them: then a note."""
    values = {name: v for name, v in ((temperature, chat.temperature), (top_p, chat.top_p)) if v is not None}
    if len(values) == 2 and takes_one_of_two(model):
        del values[top_p]
        chat.notes.append(f"{top_p} dropped: {model} takes temperature or top_p, not both")
    if takes_sampling(model):
        out.update(values)
    elif values:
        chat.notes.append(f"{' and '.join(values)} dropped: {model} takes no sampling parameters")
