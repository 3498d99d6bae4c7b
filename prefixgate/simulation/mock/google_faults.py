"""Google's errors that carry a status other than the HTTP status's usual one, or typed `details`, as the Gemini API
and Vertex AI answer them: what the fault `google=<reason>` injects on the mock's Gemini and Vertex routes.

- `location`: 400 FAILED_PRECONDITION "User location is not supported for the API use." (the Gemini API from a
  country it does not serve; google-gemini/generative-ai-python#334, many proxies' issues).
- `free_tier`: 400 FAILED_PRECONDITION "Gemini API free tier is not available in your country. Please enable
  billing on your project in Google AI Studio." (ai.google.dev/gemini-api/docs/troubleshooting).
- `service_disabled`: 403 PERMISSION_DENIED for a project whose Generative Language API is off, with the
  google.rpc ErrorInfo (reason SERVICE_DISABLED, `metadata.consumer: projects/NUMBER`, an activation URL naming the
  project), LocalizedMessage and Help details (cloud.google.com/apis/design/errors#error_info). On Vertex AI the
  same shape names the Vertex AI API (`aiplatform.googleapis.com`) and the project of the request's path.
- `quota`: 429 RESOURCE_EXHAUSTED "You exceeded your current quota...", naming the quota metric, its limit and the
  model asked for, with QuotaFailure (the violation's quotaMetric, quotaId, quotaDimensions: location and that
  model, quotaValue), Help and RetryInfo (`retryDelay`, the fault's retry_after or Google's usual 17s;
  ai.google.dev/gemini-api/docs/rate-limits). The violation is the free tier's requests per minute
  (generate_content_free_tier_requests, limit 10), or with `limit=tokens` its input tokens per minute
  (generate_content_free_tier_input_token_count, GenerateContentInputTokensPerModelPerMinute-FreeTier, limit
  250000), as Gemini API users quote them (that body whole, with QuotaFailure, Help and RetryInfo:
  google-gemini/gemini-cli-action#36, glidea/one-balance#22). A model named by its resource name (`models/m`,
  Vertex's `projects/.../models/m`) is named by its id, as Google's quota dimensions do; a request naming none, no model.
  Vertex AI words its 429 otherwise, with no details and no delay: "Resource exhausted. Please try again later.
  Please refer to .../error-code-429 for more details." (verbatim in continuedev/continue#8967,
  google-gemini/gemini-cli#14811).

`location` and `free_tier` are the Gemini API's alone (GEMINI_API_ONLY): Vertex serves each model per location
(one a location lacks is a 404, vertex_models.py) whatever the caller's country, and has no free tier.
"""

from __future__ import annotations

from prefixgate.errors import RequestError

REASONS = ("location", "free_tier", "service_disabled", "quota")
GEMINI_API_ONLY = {"location": "a caller's country the Gemini API does not serve",
                   "free_tier": "the Gemini API's free tier"}
# The Google Cloud project number the mock's errors name (the upstream account's, never a caller's).
PROJECT = "123456789012"
_TYPE = "type.googleapis.com/google.rpc."
_RATE_LIMITS = "https://ai.google.dev/gemini-api/docs/rate-limits"
_METRIC = "generativelanguage.googleapis.com/generate_content_free_tier_"
# A quota fault's limit (rate_limits.LIMITS) -> the free tier's quota for it: metric, quotaId, its size a minute
_FREE_TIER = {"requests": (_METRIC + "requests", "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", 10),
              "tokens": (_METRIC + "input_token_count", "GenerateContentInputTokensPerModelPerMinute-FreeTier", 250_000)}
_VERTEX_RESOURCE_EXHAUSTED = ("Resource exhausted. Please try again later. Please refer to "
                              "https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more details.")
_GEMINI_API = ("generativelanguage.googleapis.com", "Generative Language API")
_VERTEX_API = ("aiplatform.googleapis.com", "Vertex AI API")


def google_fault(reason: str, retry_after: float | None, model: str | None = None, *,
                 vertex_project: str | None = None, limit: str = "requests") -> RequestError:
    """The error Google answers with for `reason` (one of REASONS) to a request for `model`; `vertex_project`: the
    request went to Vertex AI, for that project, and Vertex words `service_disabled` and `quota` its own way; `limit`:
    the quota a `quota` refusal ran into (`requests` or `tokens` a minute)."""
    if reason == "location":
        return RequestError("User location is not supported for the API use.", rpc_status="FAILED_PRECONDITION")
    if reason == "free_tier":
        return RequestError("Gemini API free tier is not available in your country. Please enable billing on your "
                            "project in Google AI Studio.", rpc_status="FAILED_PRECONDITION")
    if reason == "service_disabled":
        return _service_disabled(*(_VERTEX_API if vertex_project else _GEMINI_API), vertex_project or PROJECT)
    if vertex_project:
        return RequestError(_VERTEX_RESOURCE_EXHAUSTED, status=429, kind="rate_limit")
    delay = 17 if retry_after is None else retry_after
    model_id = model.rsplit("/", 1)[-1] if model else None
    metric, quota_id, size = _FREE_TIER[limit]
    message = ("You exceeded your current quota, please check your plan and billing details. For more information on "
               f"this error, head to: {_RATE_LIMITS}. To monitor your current usage, head to: "
               f"https://ai.dev/usage?tab=rate-limit. \n* Quota exceeded for metric: {metric}, limit: {size}"
               + (f", model: {model_id}" if model_id else "") + f"\nPlease retry in {delay:g}s.")
    return RequestError(message, status=429, kind="rate_limit", details=[
        {"@type": _TYPE + "QuotaFailure", "violations": [{
            "quotaMetric": metric, "quotaId": quota_id,
            "quotaDimensions": {"location": "global", **({"model": model_id} if model_id else {})},
            "quotaValue": str(size)}]},
        {"@type": _TYPE + "Help", "links": [{"description": "Learn more about Gemini API quotas", "url": _RATE_LIMITS}]},
        {"@type": _TYPE + "RetryInfo", "retryDelay": f"{delay:g}s"}])


def _service_disabled(service: str, title: str, project: str) -> RequestError:
    activation = f"https://console.developers.google.com/apis/api/{service}/overview?project={project}"
    message = (f"{title} has not been used in project {project} before or it is disabled. Enable it by visiting "
               f"{activation} then retry. If you enabled this API recently, wait a few minutes for the action to "
               "propagate to our systems and retry.")
    return RequestError(message, status=403, kind="permission", details=[
        {"@type": _TYPE + "ErrorInfo", "reason": "SERVICE_DISABLED", "domain": "googleapis.com",
         "metadata": {"consumer": f"projects/{project}", "service": service, "serviceTitle": title,
                      "activationUrl": activation, "containerInfo": project}},
        {"@type": _TYPE + "LocalizedMessage", "locale": "en-US", "message": message},
        {"@type": _TYPE + "Help", "links": [{"description": "Google developers console API activation",
                                            "url": activation}]}])
