"""Stored results: the typed rows (`rows`), the result store with its locked appends and
compaction (`store`), joining the results of several machines (`merge`) and checksums over
rows (`checksum`)."""
