"""Which model an Azure deployment's call is priced as (prefixgate/providers/deployments.py), by the documented
rule: the model Azure's answer names; the operator's mapping where the answer names none, or names a model Azure's
price rows do not list; else the deployment's own name."""

from __future__ import annotations

from prefixgate.providers.deployments import priced_model

MAPPING = {"chat-prod": "gpt-5.4-mini"}
BY = "the deployments: of upstream 'azure-east'"


def test_the_answers_model_wins_and_a_disagreeing_mapping_is_named() -> None:
    model, note = priced_model("chat-prod", "gpt-5.4-2026-03-05", MAPPING, BY)
    assert model == "gpt-5.4-2026-03-05" and "maps it to gpt-5.4-mini" in note


def test_an_answer_naming_no_model_is_priced_by_the_mapping_or_the_deployments_name() -> None:
    assert priced_model("chat-prod", "", MAPPING, BY)[0] == "gpt-5.4-mini"
    assert priced_model("gpt-5.4", "", {}, BY)[0] == "gpt-5.4"


def test_an_answer_naming_a_model_azure_does_not_price_yet_falls_back_to_the_mapping() -> None:
    # A snapshot family newer than the price rows would otherwise leave a mapped deployment's call unpriced.
    model, note = priced_model("chat-prod", "gpt-9-2027-01-01", MAPPING, BY)
    assert model == "gpt-5.4-mini" and "no Azure price row" in note and "gpt-9-2027-01-01" in note
    assert priced_model("research", "gpt-9-2027-01-01", MAPPING, BY)[0] == "gpt-9-2027-01-01"   # nothing to fall back to
