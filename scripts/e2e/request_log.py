"""LiteLLM proxy callback for `cargo xtask e2e`.

Before each call it picks the mock answer (a fixed text plus a digest of
the request, so every task gets a different output) and appends one JSON
line to the file named by CTX_E2E_REQUEST_LOG with what the request
carried (model, messages, stream settings, sampling parameters) and the
answer chosen.
"""

import hashlib
import json
import os

from litellm.integrations.custom_logger import CustomLogger

LOGGED_PARAMS = ("temperature", "max_tokens", "top_p", "seed", "stop", "stream", "stream_options")


class RequestLog(CustomLogger):
    async def async_pre_call_hook(self, user_api_key_dict, cache, data, call_type):
        messages = data.get("messages") or []
        prompt = "".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:12]
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
