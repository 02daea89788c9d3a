"""The GPU evaluator: correctness against the original kernel, and honest timing."""
