"""Automatic choice of decoding method and tree budget for the loaded pair on this machine.

cost_model: seconds per target pass and per draft forward, measured at load and cached;
acceptance: expected tokens per pass per budget (recorded tables as the prior, learned online);
chooser: the method, budget and expansion width with the most expected tokens per second, with hysteresis.
"""
