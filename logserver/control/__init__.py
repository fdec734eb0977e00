"""The control plane: what the admin and metadata handlers ask of "the cluster" (its
brokers, its topic catalog, creating and deleting topics, growing them, coordinators,
reassignments, cluster-wide configs), behind one interface (``api.ControlPlane``) with a
single-node implementation (``local``) and an etcd one (``logserver.cluster.control``)."""
