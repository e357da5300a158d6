"""The fault modes' names, in a module of their own so that `eosctl --help` lists them without importing
the Kafka clients, and the fault code imports them without importing the package's entry point."""

FAULTS = ("duplicate-replay", "skip", "aborted-leak", "zombie", "hanging", "upstream-retry",
          "stage-replay", "stage-skip", "stage-read-uncommitted")
