"""The clusterprint stack: the cluster of the blueprint named by ``clusterprint:blueprint``."""

from clusterprint.components.program import main

main()
