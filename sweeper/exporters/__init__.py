"""Exporters that serve a run's results to other systems (Prometheus)."""
