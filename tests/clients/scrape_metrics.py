#!/usr/bin/env python3
"""Scrapes a Prometheus endpoint with a real HTTP client (urllib), parses it
with the official Python client's OpenMetrics parser (strict: a malformed
exposition fails here), and prints every sample as one JSON object per line:
{"name": ..., "labels": {...}, "value": ...}.

    scrape_metrics.py URL
"""
import json
import sys
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families

with urllib.request.urlopen(sys.argv[1], timeout=10) as response:
    if response.status != 200:
        sys.exit(f"HTTP {response.status}")
    content_type = response.headers.get("Content-Type", "")
    if not content_type.startswith("application/openmetrics-text"):
        sys.exit(f"unexpected Content-Type {content_type!r}")
    text = response.read().decode("utf-8")

for family in text_string_to_metric_families(text):
    for s in family.samples:
        print(json.dumps({"name": s.name, "labels": s.labels, "value": s.value}))
