"""The services a run uses beside its work: experiment tracking (TensorBoard, Weights & Biases) of each step's
metric rows, progress on a terminal or as JSON Lines for the logs, and the Hugging Face hub kept offline for every
command but ``fetch``. Each stands on the configuration alone and knows nothing of what it serves: the command line
and the training loop call it."""
