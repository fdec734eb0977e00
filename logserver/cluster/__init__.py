"""Cluster mode: replicated partitions and leader failover, coordinated through etcd.

Off unless ``cluster.etcd.endpoints`` is set; single-node mode never imports the etcd
client (aetcd, the optional ``cluster`` extra). ``model`` is the sans-I/O picture of the cluster (brokers, controller, topics,
partition state) and the pure decisions taken on it; ``replication`` the leader's
sans-I/O view of its followers; ``epochs`` leader epochs read back from the log;
``etcd`` the thin client glue; ``node`` one broker's part (registration, controller,
leader and follower duties, the group coordinator's placement); ``fetcher`` the
follower's replica fetcher; ``routing`` the cluster's answers to the single-node data-path
handlers (logserver.partition_routing); ``txn_markers`` the transaction coordinator's
WriteTxnMarkers to partition leaders (over ``wire``);
``topics`` and ``services`` serve the APIs the cluster answers its own way (tables in
``handlers``); ``local`` is ``logserver cluster up``.
"""
