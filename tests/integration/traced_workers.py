"""The App that ``foreperson worker`` serves in the cross-process tracing test
(test_tracing_postgres.py): a team's ``researcher`` worker, in a process that installs
the OpenTelemetry SDK and writes every finished span as a JSON line to
``$FP_TRACE_FILE`` (as an application would, with its own exporter)."""

from __future__ import annotations

import json
import os
import threading

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from foreperson import Agent
from foreperson.runtime import agent_app
from foreperson.testing import ScriptedModel


class JsonLines(SpanExporter):
    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()

    def export(self, spans):
        with self.lock, open(self.path, "a", encoding="utf-8") as out:
            for s in spans:
                out.write(json.dumps({
                    "name": s.name, "trace_id": f"{s.context.trace_id:032x}",
                    "span_id": f"{s.context.span_id:016x}",
                    "parent_id": f"{s.parent.span_id:016x}" if s.parent else None,
                    "attributes": dict(s.attributes)}) + "\n")
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(JsonLines(os.environ["FP_TRACE_FILE"])))
trace.set_tracer_provider(provider)

researcher = Agent("Find sources.", model=ScriptedModel(["3 sources"] * 10),
                   name="researcher")
app = agent_app({"researcher": researcher})
