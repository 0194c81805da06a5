"""Widgets shared by the views: the polars-backed table, plotext charts, bars and inputs."""
