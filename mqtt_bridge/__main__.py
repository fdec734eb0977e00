"""``python -m mqtt_bridge``: same as the ``mqtt-bridge`` console script."""

from mqtt_bridge.cli import main

raise SystemExit(main())
