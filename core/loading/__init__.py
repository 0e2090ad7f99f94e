"""Loading a model or a pair: checkpoints, the built-in model, offloading policy."""
