"""Shared test helpers: a scripted OpenAI-compatible server, fake layers for the FSR loop."""
