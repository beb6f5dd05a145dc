"""Programs the nodes run: Python standard library only, shipped by ``clusterprint render``."""
