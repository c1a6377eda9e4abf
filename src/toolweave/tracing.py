"""OpenTelemetry traces of agent runs, model calls, tool calls, plans and pipelines: off until `instrument()`.

```python
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolweave import InstrumentationSettings, instrument
from toolweave.testing import FakeTool

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
instrument(InstrumentationSettings(tracer_provider=provider))
FakeTool('ping').call_sync()
print([span.name for span in exporter.get_finished_spans()])
#> ['execute_tool ping']
instrument(False)
```

See docs/observability.md for the spans and their attributes, and for sending them to an OTLP backend.
"""

from __future__ import annotations

from toolweave._public import present as _present
from toolweave._tracing import InstrumentationSettings, instrument, instrumentation

__all__ = ('instrument', 'instrumentation', 'InstrumentationSettings')

_present('toolweave.tracing', __all__, globals())
