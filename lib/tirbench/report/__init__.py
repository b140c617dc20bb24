"""What the suite publishes: README tables, the overview data, the report index, ``make run-all``."""
