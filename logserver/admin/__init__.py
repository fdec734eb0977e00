"""The admin HTTP API: JSON views of the running broker and Prometheus /metrics.

``views`` builds the documents from in-memory state, ``openapi`` describes them,
``metrics`` is the scrape-time collector, ``http`` is the aiohttp glue. The console
(``console``) adds the cluster-wide views (``cluster_views``, asking the other brokers
over the Kafka protocol with ``peers``), the topic browser (``records``), configs and
ACLs (``console_views``).
"""
