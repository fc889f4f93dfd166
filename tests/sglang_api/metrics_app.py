"""SGLang's `/metrics` as SGLang serves it, with our data behind it: prometheus_client's own ASGI
app (`make_asgi_app`, the app SGLang mounts at `/metrics`) over a registry whose collector
yields the families of a text exposition file (read with prometheus_client's own parser, so a
counter is a counter family named without `_total`, as SGLang's `Counter`s are). The encoder
for each `Accept` header is prometheus_client's `choose_encoder`: what tests/it/names.rs
compares the exporter's negotiation with. Usage: metrics_app.py --port PORT --data FILE.
"""

import argparse

import uvicorn
from prometheus_client import CollectorRegistry, make_asgi_app
from prometheus_client.parser import text_string_to_metric_families


class FileCollector:
    """The families of the exposition in `path`, read anew at each scrape."""

    def __init__(self, path):
        self.path = path

    def collect(self):
        with open(self.path, encoding="utf-8") as f:
            yield from text_string_to_metric_families(f.read())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--data", required=True)
    a = p.parse_args()
    registry = CollectorRegistry()
    registry.register(FileCollector(a.data))
    uvicorn.run(make_asgi_app(registry), host="127.0.0.1", port=a.port, log_level="warning")


if __name__ == "__main__":
    main()
