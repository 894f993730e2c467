"""Experiments built on the trainers, one package each: :mod:`searchgym.experiments.squeeze` (does RL squeeze a
search agent's query strategies more than SFT does, and what does that cost on shifted questions?)."""
