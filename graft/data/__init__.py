"""What flows into and between the models: prompt sets and benchmarks (JSON Lines or Parquet, in graft's, TRL's or
verl's layout), the seeded prompt sampler, trajectory records (Parquet, the one boundary between models) and
downloads from the hub."""
