"""MetaSchedule tuning: spaces, builders, runners, the chunked tuner, databases, replay, the CLI, RPC."""
