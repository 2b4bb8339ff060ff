"""Tools around the single-file algorithms: evaluation, benchmarking, tuning, uploads."""
