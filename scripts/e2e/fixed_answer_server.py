"""A stub OpenAI-compatible server that answers one prompt with a fixed text,
for `cargo xtask e2e --llm`'s summary-conclusion figure.

The figure needs an upstream task whose output is long and states its
conclusion only at its end. A 135M model cannot be relied on to write that,
so the first run of the plan sends its requests here: a chat completion whose
messages contain --match is answered with the content of --answer, verbatim;
every other request gets HTTP 400, so the dependent fails in that first run
and is run again on the real model by `ctx run --resume`, which reuses the
stored upstream output (ctx's resume identity is the engine label, the model
and the prompt, not the server's address). Python standard library only.
"""

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--alias", default="smollm2")
    ap.add_argument("--answer", required=True, help="file whose text is the answer")
    ap.add_argument("--match", required=True, help="text the prompt must contain")
    args = ap.parse_args()
    with open(args.answer, encoding="utf-8") as f:
        answer = f.read()

    class Handler(BaseHTTPRequestHandler):
        def reply(self, status, body):
            data = json.dumps(body).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.rstrip("/").endswith("/models"):
                self.reply(200, {"object": "list", "data": [{"id": args.alias, "object": "model"}]})
            else:
                self.reply(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            try:
                request = json.loads(self.rfile.read(length))
                text = "\n".join(
                    m.get("content") or "" for m in request.get("messages", []) if isinstance(m, dict)
                )
            except (ValueError, AttributeError):
                return self.reply(400, {"error": {"message": "fixed_answer_server: unparsable request"}})
            if not self.path.endswith("/chat/completions") or args.match not in text:
                return self.reply(
                    400,
                    {"error": {"message": f"fixed_answer_server: this stub only answers a prompt containing {args.match!r}"}},
                )
            self.reply(
                200,
                {
                    "id": "fixed-answer",
                    "object": "chat.completion",
                    "created": 0,
                    "model": args.alias,
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}
                    ],
                },
            )

        def log_message(self, fmt, *a):
            print("fixed_answer_server: " + fmt % a, flush=True)

    print(f"fixed_answer_server: answering prompts containing {args.match!r} with {args.answer}", flush=True)
    ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
