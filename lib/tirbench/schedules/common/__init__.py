"""Shared by every family: parameter checks, shared-memory tiling and pipelines, padding to tiles."""
