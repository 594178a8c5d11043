"""simrec: simulation and off-policy evaluation for top-n recommendation.

Offline metrics and estimators measured against a simulated world whose truth is known.
See README.md and DESIGN for the definitions; modules are imported on demand.
"""
__version__ = "0.1.0"
