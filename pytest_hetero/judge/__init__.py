"""The judge: the only code that turns recorded facts into the gate's words.

:mod:`.failures` is the failure table (every failure category an engine, reader or layer check can
report → the owner category and the status it gives); :mod:`.verdict` writes status words over
evidence (an item's failure, gating, outside failures, the run verdict and the exit status that is
signed). Engines, readers and layer checks report a category and facts; they never name an owner.
"""
