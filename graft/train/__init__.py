"""The co-training loop: a run's request, its learners, peers (live or archive), the exchange that builds a
receiver's groups, the minibatch update and checkpoints."""
