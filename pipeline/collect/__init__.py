"""The OTLP receiver: OpenTelemetry GenAI spans into the ledger (``turnledger collect``)."""
