"""Feature Search and Reinforcement: LLM-proposed kernels, evaluated and fed back, round by round."""
