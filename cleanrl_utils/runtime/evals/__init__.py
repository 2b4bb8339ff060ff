"""Evaluators for saved models: each takes the model class and env factory as arguments."""
