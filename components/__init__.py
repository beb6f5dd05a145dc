"""Pulumi ComponentResources that build a clusterprint Slurm cluster on Google Cloud.

One module per part of the cluster; each component takes plain typed arguments (or
parts of the blueprint model) so another stack can reuse it alone, and
``clusterprint.components.cluster.TrainingCluster`` composes them from one checked blueprint.
"""
