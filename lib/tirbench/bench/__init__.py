"""Measuring: verify then time, vendor baselines, one notebook run, the results CSV, plots, parameter checks."""
