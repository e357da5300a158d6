"""The local servers eosctl starts for a user and for its tests: the embedded broker (noida-db), Apache
Kafka from Maven Central jars, PostgreSQL, and the reference pipeline that writes to them.

The core never imports this package; the commands that start servers (``sandbox``, ``demo``) wire it in.
The core reads only the state file a running sandbox leaves (``eosctl.config.sandboxstate``).
"""
