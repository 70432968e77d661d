"""The embedded default's toy world: a synthetic verifiable arithmetic task and three tiny heterogeneous models
with complementary skills, built from scratch on a CPU (docs/design.md section 7)."""
