"""PySpark pipelines on the log through Spark's stock Kafka source and sink.

Commands (``python -m spark_examples.<name> --help``; also runnable with spark-submit):

- ``device_telemetry``: streaming per-device window aggregates -> Parquet + Kafka topic
- ``anomaly_alerts``: stream-static threshold join -> alert commands keyed by device id
- ``replay``: batch read of an offset/time range -> a rebuilt table
- ``simulate``: simulated devices publishing JSON telemetry (MQTT or Kafka)
- ``demo``: logserver + bridge + devices + Spark, end to end
- ``session``: how the Kafka connector jars are found (``--check`` starts Spark)

The transformations live in ``transforms.py`` as pure DataFrame -> DataFrame functions;
``kafkaframe.py`` turns records read with kafka-python into a DataFrame with the Kafka
source's exact schema, for tests and for the demo when the connector jars are missing.
"""
