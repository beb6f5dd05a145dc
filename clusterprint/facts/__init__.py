"""Facts about the world outside clusterprint, each table with its source and the day it was read.

Machine families, zones, storage tiers, prices, GPU software, recipes and what a project
needs before ``pulumi up``: the lowest layer but one, importing only the standard library
and each other.
"""
