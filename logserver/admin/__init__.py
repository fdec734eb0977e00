"""The admin HTTP API: JSON views of the running broker and Prometheus /metrics.

``views`` builds the documents from in-memory state, ``openapi`` describes them,
``metrics`` is the scrape-time collector, ``http`` is the aiohttp glue.
"""
