"""Contamination checks: is an eval task in a training set, verbatim or nearly?

``frostgym contamination`` streams a training file against the eval tasks of the chosen
envs and splits and reports, per task, its 13-gram overlap and MinHash similarity with the
training data (``check``); ``--self`` measures frostgym's own splits against each other
(``hygiene``). The report's JSON is what ``frostgym eval --exclude`` reads.
"""
