"""Feature Search and Reinforcement: LLM-proposed kernels, judged and fed back, round by round."""
