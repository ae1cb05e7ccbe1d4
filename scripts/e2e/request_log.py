"""LiteLLM proxy callback for `cargo xtask e2e`.

Before each call it picks the mock answer (a fixed text plus a digest of
the request, so every task gets a different output) and appends one JSON
line to the file named by CTX_E2E_REQUEST_LOG with what the request
carried (model, messages, stream settings, sampling parameters) and the
answer chosen.

With CTX_E2E_ANSWERS naming a JSON file of rules (`{"rules": [{"when":
TEXT, "answers": [FIRST, RETRY]}]}`), a request whose prompt contains a
rule's `when` is answered from the rule instead: `answers[0]` on a first
attempt, `answers[1]` (or the last one) once the prompt carries ctx's
retry feedback section. The answer still ends with the request's digest, so
every request's answer stays distinct. This is how the e2e run gives a
checked task a failing answer and then a passing one.
"""

import hashlib
import json
import os

from litellm.integrations.custom_logger import CustomLogger

LOGGED_PARAMS = (
    "temperature",
    "max_tokens",
    "top_p",
    "seed",
    "stop",
    "stream",
    "stream_options",
    "response_format",
)
FEEDBACK_HEADING = "## Your previous answer failed these checks"


def load_rules():
    path = os.environ.get("CTX_E2E_ANSWERS")
    if not path:
        return []
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("rules") or []


RULES = load_rules()


def ruled_answer(prompt):
    for rule in RULES:
        if rule["when"] in prompt:
            answers = rule["answers"]
            index = 1 if FEEDBACK_HEADING in prompt else 0
            return answers[min(index, len(answers) - 1)]
    return None


class RequestLog(CustomLogger):
    async def async_pre_call_hook(self, user_api_key_dict, cache, data, call_type):
        messages = data.get("messages") or []
        prompt = "".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:12]
        ruled = ruled_answer(prompt)
        if ruled is not None:
            answer = f"{ruled}\n<!-- mock {digest} -->"
        else:
            answer = f"Mock answer {digest}: the proxy read {len(prompt)} characters."
        data["mock_response"] = answer
        record = {
            "model": data.get("model"),
            "messages": messages,
            "answer": answer,
        }
        for key in LOGGED_PARAMS:
            if key in data:
                record[key] = data[key]
        path = os.environ.get("CTX_E2E_REQUEST_LOG")
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record, sort_keys=True) + "\n")
        return data


handler = RequestLog()
