"""Cluster mode: replicated partitions and leader failover, coordinated through etcd.

Off unless ``cluster.etcd.endpoints`` is set; single-node mode never imports this
package. ``model`` is the sans-I/O picture of the cluster (brokers, controller, topics,
partition state) and the pure decisions taken on it; ``etcd`` is the thin client glue;
``node`` runs one broker's part (registration, controller, leader and follower duties);
``handlers`` serve Produce, Fetch, Metadata and CreateTopics the cluster way.
"""
