"""The machinery that runs a model: loading, sampling (Hugging Face generate, vLLM), log-probs and
cross-tokenizer scoring, grading, and sharding over processes."""
