"""Helpers every part of eosctl uses: the one error type, durations, safe text, file checks, processes,
progress, stop signals and the garbage collector's pauses. Imports nothing else of eosctl."""
