"""The system under review, read from its fleet config: the scenario as TOML, the
provenance of its figures, what the passes show about it (trace path, break controls,
the numbers report, the break pass's measured advice), trace uploads and calibration."""
