"""Transactions and producers: the coordinators' view, the open transaction at an LSO, hanging ones, whether
an abort is safe, and who each producer id is."""
